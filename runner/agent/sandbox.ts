import { existsSync, readFileSync, statSync } from "node:fs";
import { dirname, isAbsolute, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

/*
 * The bubblewrap sandbox every trainer and script runs in (README "Security"): the root
 * filesystem read-only; a private /tmp; the job's directory read-write and its datasets read-only;
 * hidden under empty mounts: the runner's work directory (other jobs, the cache), the service's
 * data directory, the secrets the host reads (its secrets directory, every *_FILE, TLS keys, the
 * runner config) and its user's home, files as well as folders; the runner's own installation
 * (its checkout and Node) visible wherever it lives; only the job's own /dev/nvidia* devices; its
 * own PID and IPC namespaces and, unless the box shares the network, its own network namespace
 * with loopback alone, reached from outside only through the job's gateway (runner/agent/egress.ts) by
 * way of the bridge inside (runner/agent/sandbox-bridge.mjs); no capabilities; killed with the runner.
 */

export interface SandboxSpec {
  /** The bubblewrap program (absolute path). */
  bwrap: string;
  jobDir: string;
  /** Paths the program may read but not change (the job's datasets in the cache). */
  readOnly: string[];
  /** Paths the program must not see at all: folders (an empty tmpfs) or files (cannot be opened). */
  hide: string[];
  /** GPU indices assigned to the job: their /dev/nvidia<N> are bound. */
  gpus: number[];
  /** Run as this user (the runner is root): bwrap keeps only setuid/setgid, setpriv drops to it. */
  runAs: { uid: number; gid: number } | null;
  /** /dev, for tests. */
  devRoot?: string;
  /** What must stay visible wherever it lives, bound back read-only if a mask covers it (default: the runner's checkout and Node). */
  visible?: string[];
  /**
   * Its own network namespace, with loopback alone: inside it, the bridge listens on each
   * 127.0.0.1 port and hands every connection to that Unix socket of the job's gateway (in
   * `dir`, bound into the sandbox at NET_DIR). null: the box's network, shared.
   */
  net?: { dir: string; listen: { port: number; socket: string }[] } | null;
}

/** Where the job's gateway sockets appear inside the sandbox. */
export const NET_DIR = "/tmp/.service-net";

const inside = (parent: string, path: string) => {
  const rel = relative(parent, path);
  return rel === "" || (!rel.startsWith("..") && !isAbsolute(rel));
};

/** The checkout this runner runs from: the nearest folder above this file holding package.json. */
function installRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (dir !== dirname(dir) && !existsSync(join(dir, "package.json"))) dir = dirname(dir);
  return dir;
}

/** The runner's own installation: its checkout, and the Node it runs on (the built-in trainers and the bridge run on both). */
export const RUNNER_INSTALL = [installRoot(), dirname(dirname(process.execPath))];

/** The bridge a sandbox with a network of its own runs first (runner/agent/sandbox-bridge.mjs; built beside the bundle). */
const BRIDGE = fileURLToPath(new URL("./sandbox-bridge.mjs", import.meta.url));

/** The /dev/nvidia* nodes for these GPUs that exist on this box, with the driver's shared ones. */
export function nvidiaDevices(gpus: number[], devRoot = "/dev"): string[] {
  const names = [...gpus.map((i) => `nvidia${i}`), "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"];
  return names.map((name) => join(devRoot, name)).filter((path) => existsSync(path));
}

/**
 * The secrets and private files of the host a sandboxed program must not see, from the runner's
 * environment: the service's secrets directory, every `*_FILE` (a secret read from a file), the
 * TLS certificate and key, the runner config, and the home directory of the user it runs as
 * (the `jobs` CLI's config with its API key, ~/.ssh, cloud credentials).
 *
 * @example
 * hostSecrets({ SERVICE_SECRETS_DIR: "/etc/ts", HF_TOKEN_FILE: "/etc/hf" }, "/etc/runner.json", "/root"); // [...]
 */
export function hostSecrets(env: Record<string, string | undefined>, configFile: string | null, home: string): string[] {
  const paths = [env.SERVICE_SECRETS_DIR, env.SERVICE_SSL_CERT, env.SERVICE_SSL_KEY, configFile ?? undefined, home, env.HOME];
  for (const [name, value] of Object.entries(env)) if (name.endsWith("_FILE")) paths.push(value);
  return [...new Set(paths.filter((p): p is string => typeof p === "string" && isAbsolute(p) && p !== "/"))];
}

/**
 * Where `path` is hidden in a sandbox that hides `hide` (and /tmp) and keeps `visible`: the mask
 * covering it, or null when the sandbox shows it.
 */
export function hiddenBy(path: string, hide: string[], visible: string[] = RUNNER_INSTALL): string | null {
  // The deepest mount covering it decides, as in sandboxArgv (a visible path is bound after a mask at its depth).
  const covering = [
    ...["/tmp", ...hide].filter((m) => inside(m, path)).map((m) => ({ m, mask: true })),
    ...visible.filter((v) => inside(v, path)).map((m) => ({ m, mask: false })),
  ].sort((a, b) => b.m.split("/").length - a.m.split("/").length || (a.mask ? 1 : -1));
  return covering[0]?.mask ? covering[0].m : null;
}

/**
 * bubblewrap's argv around `argv` (the environment goes to bwrap's own process: it hands it on
 * as it is, and values such as storage secrets stay out of the command line `ps` shows).
 *
 * @example
 * sandboxArgv(["python", "train.py"], { bwrap: "/usr/bin/bwrap", jobDir: "/w/jobs/j1", readOnly: [], hide: ["/w"], gpus: [0], runAs: null });
 */
export function sandboxArgv(argv: string[], spec: SandboxSpec): string[] {
  const existing = [...new Set(spec.hide)].filter((p) => existsSync(p));
  const isDir = (p: string) => {
    try {
      return statSync(p).isDirectory();
    } catch {
      return false;
    }
  };
  // A hidden folder inside another hidden one needs no mount of its own - unless something
  // visible lies between them (a data directory inside a checkout under a hidden home).
  const visible = (spec.visible ?? RUNNER_INSTALL).filter((v) => existsSync(v) && v !== "/");
  const covered = (p: string, by: string[]) =>
    by.some((q) => q !== p && inside(q, p) && !visible.some((v) => inside(q, v) && v !== q && inside(v, p)));
  const hidden = existing.filter((p) => !covered(p, existing));
  // A folder inside /tmp gets a mount of its own (read-only, so a write there fails rather than
  // landing in the private /tmp); a file there is hidden already.
  const folders = hidden.filter(isDir);
  const files = hidden.filter((p) => !isDir(p) && !covered(p, ["/tmp"]));
  const masks = ["/tmp", ...folders];
  const args = ["--ro-bind", "/", "/", "--dev", "/dev", "--tmpfs", "/dev/shm", "--proc", "/proc"];
  // Folders bwrap creates on the way to a bind inside a mask are 0700 by default: 0755, so a
  // run_as user can walk to its job directory.
  const made = new Set<string>();
  const bound: string[] = [];
  const ancestors = (path: string) => {
    const chain: string[] = [];
    for (let p = dirname(path); p !== "/" && masks.some((m) => inside(m, p) && m !== p) && !bound.some((b) => inside(b, p)); p = dirname(p))
      chain.unshift(p);
    for (const dir of chain) if (!made.has(dir)) (made.add(dir), args.push("--perms", "0755", "--dir", dir));
  };
  // Outer first, so a mask never covers what was bound inside it: the masks, and the visible
  // paths bound back beneath them (a checkout under /tmp, Node under a hidden home).
  const mounts = [
    { path: "/tmp", kind: "tmp" as const },
    ...folders.map((path) => ({ path, kind: "mask" as const })),
    ...visible.filter((v) => masks.some((m) => inside(m, v) && m !== v)).map((path) => ({ path, kind: "visible" as const })),
  ].sort((a, b) => a.path.split("/").length - b.path.split("/").length || (a.kind === "visible" ? 1 : -1));
  for (const mount of mounts) {
    if (mount.kind === "tmp") args.push("--perms", "1777", "--tmpfs", "/tmp");
    else if (mount.kind === "mask") (ancestors(mount.path), args.push("--tmpfs", mount.path));
    else (ancestors(mount.path), args.push("--ro-bind", mount.path, mount.path), bound.push(mount.path));
  }
  // A hidden file becomes /dev/null on a nodev mount: it cannot be opened (EACCES).
  for (const file of files) args.push("--ro-bind", "/dev/null", file);
  for (const path of spec.readOnly) (ancestors(path), args.push("--ro-bind", path, path));
  ancestors(spec.jobDir);
  args.push("--bind", spec.jobDir, spec.jobDir);
  // Hidden and read-only: a write there fails (EROFS) instead of vanishing unnoticed.
  for (const mask of folders) args.push("--remount-ro", mask);
  for (const device of nvidiaDevices(spec.gpus, spec.devRoot)) args.push("--dev-bind", device, device);
  if (spec.net) args.push("--unshare-net", "--bind", spec.net.dir, NET_DIR);
  // --new-session: no controlling terminal, so nothing inside can push keystrokes (TIOCSTI) into
  // the terminal the runner (npm start) was started from.
  args.push("--unshare-pid", "--unshare-ipc", "--new-session", "--die-with-parent", "--chdir", spec.jobDir);
  // Run as root, bwrap keeps every capability unless told otherwise.
  args.push("--cap-drop", "ALL");
  const program = spec.net
    ? [
        process.execPath,
        BRIDGE,
        JSON.stringify(spec.net.listen.map((l) => ({ port: l.port, socket: join(NET_DIR, l.socket) }))),
        "--",
        ...argv,
      ]
    : argv;
  if (!spec.runAs) return [spec.bwrap, ...args, "--", ...program];
  args.push("--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID");
  // setresuid away from 0 clears the remaining capabilities; bwrap's no_new_privs keeps setuid programs from getting them back.
  return [
    spec.bwrap,
    ...args,
    "--",
    "setpriv",
    `--reuid=${spec.runAs.uid}`,
    `--regid=${spec.runAs.gid}`,
    "--clear-groups",
    "--",
    ...program,
  ];
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

/** True when `pid` is the sandbox's own: bubblewrap (its init is one too) or the network bridge (runner/agent/sandbox-bridge.mjs), never the trainer. */
export function isSandboxProcess(pid: number): boolean {
  try {
    return ["bwrap", "sandbox-bridge"].includes(readFileSync(`/proc/${pid}/comm`, "utf8").trim());
  } catch {
    return false;
  }
}
