// The runner's one configuration (runner/agent/config.ts): the config file, flags, environment and
// defaults; a mistake stops the runner with one line naming the field. Also the pure pieces of
// the sandbox: bubblewrap's argv and which scripts a box declares.
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { loadRunnerConfig, RunnerConfigError } from "../../runner/agent/config";
import { boxPolicy } from "../../runner/agent/box-policy";
import { findProgram, sandboxArgv } from "../../runner/agent/sandbox";
import { scriptAllowed } from "../../runner/agent/scripts";
import { readConfigFromEnvironment } from "../../edge/local/host-environment";
import { prerequisite } from "../helpers/prerequisites";

const dir = mkdtempSync(join(tmpdir(), "runner-config-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function file(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

/** Runs `runner start` with these arguments; its exit code and what it printed on stderr. */
function runner(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stderr: string }> {
  return new Promise((done) => {
    execFile(
      process.execPath,
      ["--import", "tsx", "runner/agent/main.ts", "start", ...args],
      { env: { ...process.env, RUNNER_TOKEN: "stw_test", ...env }, timeout: 30_000 },
      (error, _stdout, stderr) => done({ code: error ? ((error as { code?: number }).code ?? null) : 0, stderr }),
    );
  });
}

describe("runner start with a bad config", () => {
  it("stops at once with one line naming the file and the field: bad JSON, an unknown key, a bad type", async () => {
    const cases: [string, string, string][] = [
      ["bad.json", "{ trainers: ", "not valid JSON"],
      ["unknown.json", JSON.stringify({ trainer: { x: ["y"] } }), "trainer is not a known setting"],
      ["type.json", JSON.stringify({ allow_raw_commands: "yes" }), "allow_raw_commands Invalid input: expected boolean, received string"],
      [
        "nested.json",
        JSON.stringify({ trainers: { flux: "flux-train --fast" } }),
        "trainers.flux Invalid input: expected array, received string",
      ],
      ["relative.json", JSON.stringify({ scripts: ["hooks/*.sh"] }), "scripts.0 must be an absolute path (or glob)"],
      ["builtin.json", JSON.stringify({ trainers: { demo: ["/bin/true"] } }), "trainers.demo is built in and cannot be redefined"],
      ["sandbox.json", JSON.stringify({ sandbox: "maybe" }), 'sandbox Invalid option: expected one of "auto"|"required"|"off"'],
      ["token.json", JSON.stringify({ pass_env: ["HF_HOME", "RUNNER_TOKEN"] }), "pass_env.1 must not hand the runner's token to trainers"],
    ];
    // What each mistake says, from the runner's own config loader; then `runner start` itself (a cold
    // node + tsx start each, 0.7 s of CPU idle: nine of them in turn passed the test's 30 s on a slow,
    // busy machine) for two of them: one line on stderr and exit code 2.
    for (const [name, text, message] of cases) {
      const path = file(name, text);
      const load = () => loadRunnerConfig({ url: "http://127.0.0.1:9", config: path }, { RUNNER_TOKEN: "stw_test" });
      expect(load, name).toThrow(RunnerConfigError);
      expect(load, name).toThrow(`runner config ${path}: ${message}`);
    }
    const [bad, missing] = await Promise.all([
      runner(["--url", "http://127.0.0.1:9", "--config", join(dir, "bad.json")]),
      // RUNNER_CONFIG is read the same way; a missing file says so.
      runner(["--url", "http://127.0.0.1:9"], { RUNNER_CONFIG: join(dir, "nope.json") }),
    ]);
    expect(bad.code).toBe(2);
    expect(bad.stderr.trim().split("\n")).toHaveLength(1);
    expect(bad.stderr.trim()).toContain(`runner: runner config ${join(dir, "bad.json")}: not valid JSON`);
    expect([missing.code, missing.stderr.trim()]).toEqual([2, `runner: runner config ${join(dir, "nope.json")}: cannot be read (ENOENT)`]);
  });

  it("refuses a plain http:// edge URL except on loopback", async () => {
    const refused = await runner(["--url", "http://10.1.2.3:8001"]);
    expect(refused.code).toBe(2);
    expect(refused.stderr.split("\n")[0]).toBe(
      "runner: --url http://10.1.2.3:8001 is plain http on a non-loopback host: the worker token would travel in clear; use https",
    );
    // Loopback http is accepted: it gets as far as trying to register (nothing listens on port 9).
    const loopback = await runner(["--url", "http://127.0.0.1:9"]);
    expect(loopback.code).toBe(1);
    expect(loopback.stderr).toContain("runner: could not register with http://127.0.0.1:9");
  });

  it('refuses to start when the sandbox is "required" and bubblewrap is missing', async () => {
    const path = file("required.json", JSON.stringify({ sandbox: "required", bwrap: "/no/such/bwrap" }));
    const got = await runner(["--url", "http://127.0.0.1:9", "--config", path]);
    expect([got.code, got.stderr.trim()]).toEqual([
      2,
      `runner: runner config ${path}: sandbox is "required" but bubblewrap (/no/such/bwrap) is not installed on this box`,
    ]);
  });
});

describe("the runner's configuration", () => {
  it("has defaults; the file fills in the box's programs; flags win over the file and the environment", () => {
    const plain = loadRunnerConfig({ url: "https://edge.example" }, { RUNNER_TOKEN: "t", PATH: "/usr/bin" }, "/srv");
    expect(plain).toMatchObject({
      token: "t",
      role: "remote",
      workDir: "/srv/.runner",
      pollMs: 5000,
      stopGraceSeconds: 10,
      trainers: {},
      scripts: [],
      allowRawCommands: false,
      sandbox: "auto",
      bwrap: "bwrap",
      runAs: null,
      // The home of the user it runs as: the jobs CLI's key, ~/.ssh, cloud credentials.
      hide: [homedir()],
      network: "isolated",
      allowHosts: [],
      passEnv: {},
      configFile: null,
      path: "/usr/bin",
    });
    const path = file(
      "full.json",
      JSON.stringify({
        trainers: { flux: ["/opt/flux/train", "--gpus", "{num_processes}"] },
        scripts: ["/opt/hooks/*"],
        allow_raw_commands: true,
        work_dir: "/var/lib/runner",
        run_as: { uid: 1000, gid: 1000 },
        hide: ["/srv/secrets"],
        pass_env: ["HF_HOME", "UNSET_ONE"],
      }),
    );
    const full = loadRunnerConfig(
      { url: "https://edge.example", token: "flag", local: true },
      { RUNNER_TOKEN: "env", RUNNER_CONFIG: path, HF_HOME: "/cache/hf" },
    );
    expect(full).toMatchObject({
      token: "flag",
      role: "local",
      workDir: "/var/lib/runner",
      trainers: { flux: ["/opt/flux/train", "--gpus", "{num_processes}"] },
      scripts: ["/opt/hooks/*"],
      allowRawCommands: true,
      runAs: { uid: 1000, gid: 1000 },
      hide: ["/srv/secrets", path, homedir()],
      passEnv: { HF_HOME: "/cache/hf" },
      configFile: path,
    });
    // Every secret the host reads is hidden too: its secrets folder, *_FILE, the TLS key.
    const secrets = loadRunnerConfig(
      { url: "https://edge.example" },
      {
        RUNNER_TOKEN: "t",
        SERVICE_SECRETS_DIR: "/etc/ts/secrets",
        HF_TOKEN_FILE: "/etc/ts/hf",
        SERVICE_SSL_KEY: "/etc/ts/key.pem",
        HOME: "/home/ops",
      },
    );
    expect(secrets.hide).toEqual(
      ["/etc/ts/secrets", "/etc/ts/key.pem", homedir(), "/home/ops", "/etc/ts/hf"].filter((p, i, all) => all.indexOf(p) === i),
    );
    expect(loadRunnerConfig({ url: "https://edge.example", "work-dir": "/elsewhere", config: path }, { RUNNER_TOKEN: "t" }).workDir).toBe(
      "/elsewhere",
    );
    expect(
      loadRunnerConfig(
        { url: "https://edge.example", config: file("nobody.json", JSON.stringify({ run_as: "nobody" })) },
        { RUNNER_TOKEN: "t" },
      ).runAs,
    ).toEqual({ uid: 65534, gid: 65534 });
    expect(() =>
      loadRunnerConfig(
        { url: "https://edge.example", config: file("ghost.json", JSON.stringify({ run_as: "no-such-user-here" })) },
        { RUNNER_TOKEN: "t" },
      ),
    ).toThrow('run_as: no user named "no-such-user-here" on this box');
    expect(() => loadRunnerConfig({ url: "https://edge.example" }, {})).toThrow(
      new RunnerConfigError("--token (or RUNNER_TOKEN) is required"),
    );
    for (const ok of ["http://localhost:8001", "http://127.0.0.1:8001", "http://[::1]:8001", "https://10.0.0.5"])
      expect(loadRunnerConfig({ url: ok }, { RUNNER_TOKEN: "t" }).url).toBe(ok);
    expect(() => loadRunnerConfig({ url: "ftp://edge" }, { RUNNER_TOKEN: "t" })).toThrow('--url must be an http(s) URL, not "ftp://edge"');
  });

  it("npm start checks RUNNER_CONFIG before it starts anything", () => {
    const path = file("npm-start.json", JSON.stringify({ scripts: "all" }));
    expect(() => readConfigFromEnvironment({ RUNNER_CONFIG: path })).toThrow(
      `runner config ${path}: scripts Invalid input: expected array, received string`,
    );
    expect(readConfigFromEnvironment({ RUNNER_CONFIG: file("ok.json", "{}") }).runnerConfig).toBe(join(dir, "ok.json"));
    // No local runner, nothing to check.
    expect(readConfigFromEnvironment({ RUNNER_CONFIG: path, SERVICE_LOCAL_RUNNER: "0" }).localRunner).toBe(false);
  });
});

describe("sandbox pieces", () => {
  it("builds bubblewrap's argv: read-only root, private /tmp, hidden paths read-only, the job directory writable, only the job's GPUs", () => {
    const dev = join(dir, "dev");
    mkdirSync(dev);
    for (const name of ["nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"]) writeFileSync(join(dev, name), "");
    const spec = {
      bwrap: "/usr/bin/bwrap",
      jobDir: "/w/jobs/j1",
      readOnly: ["/w/cache/datasets/faces"],
      hide: ["/w", "/w/cache", dir],
      gpus: [1],
      runAs: null,
      devRoot: dev,
      visible: ["/opt/training-service"],
    };
    const argv = sandboxArgv(["train", "--fast"], spec);
    // The folders between /tmp and `dir` (the test run's TMPDIR lies below /tmp), made in the private /tmp.
    const between: string[] = [];
    for (let p = dirname(dir); p.startsWith("/tmp/"); p = dirname(p)) between.unshift(`--perms 0755 --dir ${p}`);
    expect(argv.join(" ")).toBe(
      [
        "/usr/bin/bwrap --ro-bind / / --dev /dev --tmpfs /dev/shm --proc /proc --perms 1777 --tmpfs /tmp",
        ...between,
        `--tmpfs ${dir}`, // /w does not exist here: nothing to hide
        "--ro-bind /w/cache/datasets/faces /w/cache/datasets/faces --bind /w/jobs/j1 /w/jobs/j1",
        `--remount-ro ${dir}`,
        `--dev-bind ${dev}/nvidia1 ${dev}/nvidia1 --dev-bind ${dev}/nvidiactl ${dev}/nvidiactl --dev-bind ${dev}/nvidia-uvm ${dev}/nvidia-uvm`,
        "--unshare-pid --unshare-ipc --new-session --die-with-parent --chdir /w/jobs/j1 --cap-drop ALL -- train --fast",
      ].join(" "),
    );
    // Inside a hidden folder, the way to the job directory is made walkable; run_as drops to the user.
    const nested = sandboxArgv(["train"], {
      ...spec,
      jobDir: join(dir, "jobs", "j2"),
      readOnly: [],
      gpus: [],
      runAs: { uid: 1000, gid: 1001 },
    });
    expect(nested.join(" ")).toContain(
      `--perms 0755 --dir ${join(dir, "jobs")} --bind ${join(dir, "jobs", "j2")} ${join(dir, "jobs", "j2")} --remount-ro ${dir}`,
    );
    expect(nested.slice(-13).join(" ")).toBe(
      "--cap-drop ALL --cap-add CAP_SETUID --cap-add CAP_SETGID -- setpriv --reuid=1000 --regid=1001 --clear-groups -- train",
    );
    // A checkout under /tmp (the built-in trainers run from it) is bound back read-only beneath the
    // private /tmp, before its work and data directories are hidden.
    const checkout = join(dir, "checkout");
    mkdirSync(join(checkout, ".data"), { recursive: true });
    const fromTmp = sandboxArgv(["train"], { ...spec, visible: [checkout], hide: [join(checkout, ".data")], readOnly: [], gpus: [] });
    expect(fromTmp.join(" ")).toContain(
      `--tmpfs /tmp ${[...between, `--perms 0755 --dir ${dir}`].join(" ")} --ro-bind ${checkout} ${checkout} --tmpfs ${join(checkout, ".data")} --bind /w/jobs/j1`,
    );
  });

  it.skipIf(!prerequisite("bubblewrap (bwrap)", findProgram("bwrap", process.env.PATH ?? "") !== null))(
    "keeps a declared installation visible wherever it lives (a Python under the hidden home), and refuses at start one it cannot show",
    () => {
      const home = mkdtempSync(join("/var/tmp", "runner-home-"));
      try {
        const prefix = join(home, ".pyenv", "versions", "3.11");
        mkdirSync(join(prefix, "bin"), { recursive: true });
        writeFileSync(join(prefix, "bin", "python3"), "#!/bin/sh\n", { mode: 0o755 });
        const config = (file: Record<string, unknown>) =>
          loadRunnerConfig(
            { url: "https://edge.example", config: join(dir, "box.json") },
            { RUNNER_TOKEN: "t", HOME: home, PATH: "/usr/bin" },
          );
        writeFileSync(
          join(dir, "box.json"),
          JSON.stringify({ trainers: { py: [join(prefix, "bin", "python3"), "train.py"] }, sandbox: "required" }),
        );
        const box = boxPolicy(config({}), () => {});
        expect(box.visible).toContain(prefix);
        expect(box.hide).toContain(home);
        // Its argv binds the prefix back under the hidden home.
        const argv = sandboxArgv(["train"], {
          bwrap: "/usr/bin/bwrap",
          jobDir: "/w/jobs/j1",
          readOnly: [],
          hide: box.hide,
          gpus: [],
          runAs: null,
          visible: box.visible,
        });
        expect(argv.join(" ")).toContain(
          `--tmpfs ${home} --perms 0755 --dir ${join(home, ".pyenv")} --perms 0755 --dir ${join(home, ".pyenv", "versions")} --ro-bind ${prefix} ${prefix}`,
        );
        // A trainer in the work directory, or right in the hidden home, cannot be shown: the runner does not start.
        for (const [program, under] of [
          [join(dir, "work", "bin", "train"), join(dir, "work")],
          [join(home, "bin", "train"), home],
        ] as const) {
          mkdirSync(join(program, ".."), { recursive: true });
          writeFileSync(program, "#!/bin/sh\n", { mode: 0o755 });
          writeFileSync(
            join(dir, "box.json"),
            JSON.stringify({ trainers: { bad: [program] }, sandbox: "required", work_dir: join(dir, "work") }),
          );
          expect(() => boxPolicy(config({}), () => {})).toThrow(
            `runner config ${join(dir, "box.json")}: trainers.bad ${program} lies under ${under}, which the sandbox hides from trainers`,
          );
        }
      } finally {
        rmSync(home, { recursive: true, force: true });
      }
    },
  );

  it("allows a script only when the box declares its program (paths and globs; bare names looked up on PATH)", () => {
    expect(scriptAllowed("/opt/hooks/upload.sh", ["/opt/hooks/*"], "")).toBe(true);
    expect(scriptAllowed("/opt/hooks/../../bin/sh", ["/opt/hooks/*"], "")).toBe(false);
    expect(scriptAllowed("./upload.sh", ["/opt/hooks/*"], "", "/opt/hooks")).toBe(true);
    expect(scriptAllowed("./upload.sh", ["/opt/hooks/*"], "", "/w/jobs/j1")).toBe(false);
    expect(scriptAllowed("/usr/bin/touch", ["/opt/hooks/*"], "")).toBe(false);
    expect(scriptAllowed("sh", ["/usr/bin/sh", "/bin/sh"], "/usr/bin:/bin")).toBe(true);
    expect(scriptAllowed("sh", ["/opt/*"], "/usr/bin:/bin")).toBe(false);
    expect(scriptAllowed("no-such-program", ["*"], "/usr/bin")).toBe(false);
  });
});
