import { existsSync, readFileSync } from "node:fs";
import { dirname, isAbsolute, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

/*
 * The bubblewrap sandbox every trainer and script runs in (README "Security"): the root
 * filesystem read-only, a private /tmp, the job's directory read-write, its datasets read-only,
 * the runner's work directory (other jobs, the cache) and the service's data directory hidden
 * under empty tmpfs mounts, only the job's own /dev/nvidia* devices, its own PID namespace, no
 * capabilities, killed with the runner. The network is shared on purpose: a trainer posts its
 * events to the runner's loopback callback and uploads to the edge's storage endpoint.
 */

export interface SandboxSpec {
  /** The bubblewrap program (absolute path). */
  bwrap: string;
  jobDir: string;
  /** Paths the program may read but not change (the job's datasets in the cache). */
  readOnly: string[];
  /** Paths the program must not see at all. */
  hide: string[];
  /** GPU indices assigned to the job: their /dev/nvidia<N> are bound. */
  gpus: number[];
  /** Run as this user (the runner is root): bwrap keeps only setuid/setgid, setpriv drops to it. */
  runAs: { uid: number; gid: number } | null;
  /** /dev, for tests. */
  devRoot?: string;
  /** The runner's own checkout (default: found from this file), which the built-in trainers run from. */
  install?: string;
}

/** The checkout this runner runs from: the nearest folder above this file holding package.json. */
function installRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (dir !== dirname(dir) && !existsSync(join(dir, "package.json"))) dir = dirname(dir);
  return dir;
}
const INSTALL_ROOT = installRoot();

const inside = (parent: string, path: string) => {
  const rel = relative(parent, path);
  return rel === "" || (!rel.startsWith("..") && !isAbsolute(rel));
};

/** The /dev/nvidia* nodes for these GPUs that exist on this box, with the driver's shared ones. */
export function nvidiaDevices(gpus: number[], devRoot = "/dev"): string[] {
  const names = [...gpus.map((i) => `nvidia${i}`), "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"];
  return names.map((name) => join(devRoot, name)).filter((path) => existsSync(path));
}

/**
 * bubblewrap's argv around `argv` (the environment goes to bwrap's own process: it hands it on
 * as it is, and values such as storage secrets stay out of the command line `ps` shows).
 *
 * @example
 * sandboxArgv(["python", "train.py"], { bwrap: "/usr/bin/bwrap", jobDir: "/w/jobs/j1", readOnly: [], hide: ["/w"], gpus: [0], runAs: null });
 */
export function sandboxArgv(argv: string[], spec: SandboxSpec): string[] {
  // A hidden path inside another hidden one needs no mount of its own; one inside /tmp does,
  // since /tmp is the program's private, writable scratch space.
  const unique = [...new Set(spec.hide)].filter((p) => existsSync(p));
  const hidden = unique.filter((p) => !unique.some((q) => q !== p && inside(q, p)));
  const masks = ["/tmp", ...hidden];
  const args = ["--ro-bind", "/", "/", "--dev", "/dev", "--tmpfs", "/dev/shm", "--proc", "/proc", "--tmpfs", "/tmp"];
  // Folders bwrap creates on the way to a bind inside a mask are 0700 by default: 0755, so a
  // run_as user can walk to its job directory.
  const made = new Set<string>();
  const ancestors = (path: string) => {
    const chain: string[] = [];
    for (let p = dirname(path); p !== "/" && masks.some((m) => inside(m, p) && m !== p); p = dirname(p)) chain.unshift(p);
    for (const dir of chain) if (!made.has(dir)) (made.add(dir), args.push("--perms", "0755", "--dir", dir));
  };
  // A checkout under /tmp (the built-in trainers run from it) would vanish under the private
  // /tmp: it is bound back, read-only, before anything in it (the work and data directories) is hidden.
  const install = spec.install ?? INSTALL_ROOT;
  if (inside("/tmp", install) && install !== "/tmp" && !hidden.some((h) => inside(h, install))) {
    ancestors(install);
    args.push("--ro-bind", install, install);
  }
  for (const mask of hidden) args.push("--tmpfs", mask);
  for (const path of spec.readOnly) (ancestors(path), args.push("--ro-bind", path, path));
  ancestors(spec.jobDir);
  args.push("--bind", spec.jobDir, spec.jobDir);
  // Hidden and read-only: a write there fails (EROFS) instead of vanishing unnoticed.
  for (const mask of hidden) args.push("--remount-ro", mask);
  for (const device of nvidiaDevices(spec.gpus, spec.devRoot)) args.push("--dev-bind", device, device);
  // --new-session: no controlling terminal, so nothing inside can push keystrokes (TIOCSTI) into
  // the terminal the runner (npm start) was started from.
  args.push("--unshare-pid", "--unshare-ipc", "--new-session", "--die-with-parent", "--chdir", spec.jobDir);
  // Run as root, bwrap keeps every capability unless told otherwise.
  args.push("--cap-drop", "ALL");
  if (!spec.runAs) return [spec.bwrap, ...args, "--", ...argv];
  args.push("--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID");
  // setresuid away from 0 clears the remaining capabilities; bwrap's no_new_privs keeps setuid programs from getting them back.
  return [spec.bwrap, ...args, "--", "setpriv", `--reuid=${spec.runAs.uid}`, `--regid=${spec.runAs.gid}`, "--clear-groups", "--", ...argv];
}

/** Where `program` is: itself when a path that exists, else the first match on `path`; null when nowhere. */
export function findProgram(program: string, path: string): string | null {
  if (program.includes("/")) return existsSync(program) ? program : null;
  for (const dir of path.split(":")) if (dir && existsSync(join(dir, program))) return join(dir, program);
  return null;
}

/**
 * The processes below `pid` (children first), from /proc: how a stop reaches a trainer inside the
 * sandbox without killing bwrap, whose death would kill the trainer before it can save.
 */
export function descendants(pid: number): number[] {
  const out: number[] = [];
  const walk = (parent: number) => {
    let children: number[] = [];
    try {
      children = readFileSync(`/proc/${parent}/task/${parent}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number);
    } catch {}
    for (const child of children) {
      out.push(child);
      walk(child);
    }
  };
  walk(pid);
  return out;
}

/** True when `pid` is a bubblewrap process (the sandbox's own init is one). */
export function isBwrap(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/comm`, "utf8").trim() === "bwrap";
  } catch {
    return false;
  }
}
