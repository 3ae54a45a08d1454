import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createServer, type AddressInfo, type Server } from "node:net";
import { describe, expect, it } from "vitest";
import { tempDataDir } from "../helpers/stack";
import { freePort } from "../helpers/ports";
import { endWhenDone } from "../helpers/cleanup";
import { descendants } from "../helpers/process-tree";

/** A runner config (RUNNER_CONFIG) whose work_dir is a fresh temp dir, not ./.runner. */
function runnerConfig(): { RUNNER_CONFIG: string; workDir: string } {
  const dir = mkdtempSync(join(tmpdir(), "local-start-runner-"));
  writeFileSync(join(dir, "runner.json"), JSON.stringify({ work_dir: join(dir, "work") }));
  return { RUNNER_CONFIG: join(dir, "runner.json"), workDir: join(dir, "work") };
}

/** Runs `npm start` (or, for exact stderr, its command without npm) with these variables; job directories go to a temp dir unless RUNNER_CONFIG says otherwise. */
function start(env: Record<string, string>, viaNpm = false) {
  const [command, args] = viaNpm ? ["npm", ["start", "--silent"]] : [process.execPath, ["--import", "tsx", "edge/local/main.ts"]];
  const child = spawn(command, args as string[], {
    env: { ...process.env, RUNNER_CONFIG: runnerConfig().RUNNER_CONFIG, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  endWhenDone(child);
  let stderr = "";
  let stdout = "";
  child.stderr.on("data", (chunk) => (stderr += chunk));
  child.stdout.on("data", (chunk) => (stdout += chunk));
  const exited = new Promise<number | null>((done) =>
    child.on("exit", (code, signal) => done(code ?? (signal ? 128 + (signal === "SIGTERM" ? 15 : 2) : null))),
  );
  return { child, exited, output: () => ({ stderr, stdout }) };
}

/** `exited`, or a failure naming `what` and its output when it has not exited within 20 s (a stop that hangs). */
async function exitsWithin<T>(exited: Promise<T>, what: string, output: () => string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, fail) => {
    timer = setTimeout(() => fail(new Error(`${what} did not exit within 20 s of SIGTERM; its output:\n${output()}`)), 20_000);
  });
  try {
    return await Promise.race([exited, late]);
  } finally {
    clearTimeout(timer);
  }
}

describe("npm start", () => {
  it("comes up, prints the URL and what to do next, and stops everything on SIGTERM", async () => {
    const port = await freePort();
    const dataDir = tempDataDir();
    const logFile = `${dataDir}/service.log`;
    const run = start(
      {
        SERVICE_HOST: "127.0.0.1",
        SERVICE_PORT: String(port),
        SERVICE_DATA_DIR: dataDir,
        SERVICE_LOG_FILE: logFile,
        SERVICE_LOG_FORMAT: "json",
      },
      true,
    );
    await expect.poll(() => run.output().stderr, { timeout: 30_000, interval: 200 }).toContain("Training service is up");
    const { stderr } = run.output();
    expect(stderr).toContain(`http://127.0.0.1:${port}`);
    expect(stderr).toContain(`Next: open http://127.0.0.1:${port}/ in a browser to create the first admin, or:`);
    expect(stderr).toContain(`/api/cloud/auth/setup/first-admin`);
    expect(await (await fetch(`http://127.0.0.1:${port}/api/cloud/health/live`)).json()).toEqual({ status: "ok" });
    // The printed one-time setup token creates the first admin from another machine (here: one a
    // local proxy forwards); without it nothing is created.
    const setupToken = /give the setup token ([A-Za-z0-9_-]{32}) /.exec(stderr)?.[1];
    expect(setupToken).toBeDefined();
    const firstAdmin = (extra: Record<string, string>) =>
      fetch(`http://127.0.0.1:${port}/api/cloud/auth/setup/first-admin`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-forwarded-for": "203.0.113.40" },
        body: JSON.stringify({ email: "a@example.com", username: "admin", password: "admin-password-1", ...extra }),
      });
    expect((await firstAdmin({})).status).toBe(403);
    expect((await firstAdmin({ setup_token: setupToken! })).status).toBe(201);

    const processes = descendants(run.child.pid!);
    expect(processes.length).toBeGreaterThan(0); // workerd runs below it
    // No V8 inspector (it runs code in the Worker): only a test's stack may open one (the `inspector` stack option).
    const commands = processes.map((pid) => readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0"));
    expect(commands.some((argv) => argv.some((a) => a.endsWith("workerd")))).toBe(true);
    expect(commands.flat().filter((arg) => arg.includes("inspector"))).toEqual([]);
    run.child.kill("SIGTERM");
    expect(await run.exited).toBe(0);
    expect(run.output().stdout).toContain("received SIGTERM, stopping");
    await expect.poll(() => processes.filter((pid) => existsSync(`/proc/${pid}`)), { timeout: 5_000 }).toEqual([]);
    await expect(fetch(`http://127.0.0.1:${port}/api/cloud/health/live`)).rejects.toThrow();

    // SERVICE_LOG_FILE receives the same JSON lines, the Worker's and the host's.
    const logged = readFileSync(logFile, "utf8")
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line));
    expect(logged.map((l) => l.message)).toEqual(
      expect.arrayContaining([
        "applying schema migration 4 (users_and_credentials)",
        "GET /api/cloud/health/live 200",
        "received SIGTERM, stopping",
      ]),
    );
  });

  it("runs this machine's runner: the shipped demo environment trains to completion, and SIGTERM ends its trainer too", async () => {
    const port = await freePort();
    const dataDir = tempDataDir();
    const { RUNNER_CONFIG, workDir } = runnerConfig();
    const run = start({
      SERVICE_HOST: "127.0.0.1",
      SERVICE_PORT: String(port),
      SERVICE_DATA_DIR: dataDir,
      RUNNER_CONFIG,
      PATH: `${process.cwd()}/test/fakes:${process.env.PATH}`,
      FAKE_NVIDIA_GPUS: "1",
    });
    await expect
      .poll(() => run.output().stdout, { timeout: 30_000, interval: 200 })
      .toContain("runner: registered as worker 1 (local) with 1 GPU(s): 0 NVIDIA A100-SXM4-80GB");
    const base = `http://127.0.0.1:${port}`;
    const post = (path: string, body: unknown, headers: Record<string, string>) =>
      fetch(base + path, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });
    const admin = await post(
      "/api/cloud/auth/setup/first-admin",
      { email: "a@example.com", username: "admin", password: "admin-password-1" },
      {},
    );
    const cookie = /(st_session=[^;]+)/.exec(admin.headers.get("set-cookie") ?? "")![1]!;
    const { key } = (await (await post("/api/cloud/auth/api-keys", { name: "k" }, { cookie })).json()) as { key: string };
    const auth = { "x-api-key": key };
    expect((await post("/api/configs/environments", { name: "demo", from_example: "demo" }, auth)).status).toBe(201);
    // Faster steps than the shipped 200 ms, and a second job that will still be running at the end.
    const config = ((await (await fetch(`${base}/api/configs/demo`, { headers: auth })).json()) as { config: Record<string, unknown> })
      .config;
    await fetch(`${base}/api/configs/demo`, {
      method: "PUT",
      headers: { ...auth, "content-type": "application/json" },
      body: JSON.stringify({ config: { ...config, "--demo_step_ms": 20 } }),
    });
    const submitted = (await (await post("/api/queue/submit", { config_name: "demo" }, auth)).json()) as { job_id: string; status: string };
    expect(submitted.status).toBe("running");
    const status = async () =>
      (
        (await (await fetch(`${base}/api/queue?include_completed=true`, { headers: auth })).json()) as {
          jobs: { job_id: string; status: string }[];
        }
      ).jobs.find((j) => j.job_id === submitted.job_id)?.status;
    await expect.poll(status, { timeout: 30_000, interval: 200 }).toBe("completed");
    // Job directories live in the runner's work_dir, never inside the data directory.
    expect(readdirSync(`${workDir}/jobs/${submitted.job_id}/output`).sort()).toEqual(["checkpoint-40", "checkpoint-50"]);
    expect(existsSync(`${dataDir}/runner`)).toBe(false);

    await fetch(`${base}/api/configs/demo`, {
      method: "PUT",
      headers: { ...auth, "content-type": "application/json" },
      body: JSON.stringify({ config: { ...config, "--max_train_steps": 100000, "--demo_step_ms": 50 } }),
    });
    const long = (await (await post("/api/queue/submit", { config_name: "demo" }, auth)).json()) as { job_id: string };
    await expect.poll(() => run.output().stdout, { timeout: 30_000, interval: 200 }).toContain(`runner: job ${long.job_id} started`);
    const processes = descendants(run.child.pid!);
    run.child.kill("SIGTERM");
    expect(await run.exited).toBe(0);
    expect(run.output().stdout).toContain(`runner: job ${long.job_id} ended`);
    await expect.poll(() => processes.filter((pid) => existsSync(`/proc/${pid}`)), { timeout: 5_000 }).toEqual([]);
  });

  it("--env <name> validates that environment at start and starts training it; an invalid one is reported field by field", async () => {
    const port = await freePort();
    const dataDir = tempDataDir();
    const settings = {
      SERVICE_HOST: "127.0.0.1",
      SERVICE_PORT: String(port),
      SERVICE_DATA_DIR: dataDir,
      RUNNER_CONFIG: runnerConfig().RUNNER_CONFIG,
    };
    const base = `http://127.0.0.1:${port}`;
    const first = start(settings);
    await expect.poll(() => first.output().stdout, { timeout: 30_000, interval: 200 }).toContain("runner: registered");
    const post = (path: string, body: unknown, headers: Record<string, string>) =>
      fetch(base + path, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });
    const admin = await post(
      "/api/cloud/auth/setup/first-admin",
      { email: "a@example.com", username: "admin", password: "admin-password-1" },
      {},
    );
    const cookie = /(st_session=[^;]+)/.exec(admin.headers.get("set-cookie") ?? "")![1]!;
    const { key } = (await (await post("/api/cloud/auth/api-keys", { name: "k" }, { cookie })).json()) as { key: string };
    const auth = { "x-api-key": key };
    await post("/api/configs/environments", { name: "demo", from_example: "demo" }, auth);
    const config = ((await (await fetch(`${base}/api/configs/demo`, { headers: auth })).json()) as { config: Record<string, unknown> })
      .config;
    const put = (name: string, c: Record<string, unknown>) =>
      fetch(`${base}/api/configs/${name}`, {
        method: "PUT",
        headers: { ...auth, "content-type": "application/json" },
        body: JSON.stringify({ config: c }),
      });
    await put("demo", { ...config, "--demo_step_ms": 10 });
    await post("/api/configs/environments", { name: "broken" }, auth);
    // What a whole configuration needs (an environment may be saved without it): each is listed at start.
    await put("broken", { "--trainer": "demo", "--max_train_steps": 0, "--validation_method": "external-script" });
    first.child.kill("SIGTERM");
    expect(await exitsWithin(first.exited, "the first start", () => JSON.stringify(first.output()))).toBe(0);

    const withEnv = spawn(process.execPath, ["--import", "tsx", "edge/local/main.ts", "--env", "demo"], {
      env: { ...process.env, ...settings },
      stdio: ["ignore", "pipe", "pipe"],
    });
    endWhenDone(withEnv);
    let out = "";
    withEnv.stdout.on("data", (d) => (out += d));
    const exited = new Promise((r) => withEnv.once("exit", r));
    await expect
      .poll(() => out, { timeout: 30_000, interval: 200 })
      .toMatch(/--env demo: Configuration Valid; training started \(job (local-\w+)\)/);
    const jobId = /training started \(job (local-\w+)\)/.exec(out)![1]!;
    await expect
      .poll(
        async () =>
          (
            (await (await fetch(`${base}/api/queue?include_completed=true`, { headers: auth })).json()) as {
              jobs: { job_id: string; status: string }[];
            }
          ).jobs.find((j) => j.job_id === jobId)?.status,
        { timeout: 30_000, interval: 200 },
      )
      .toBe("completed");
    withEnv.kill("SIGTERM");
    await exitsWithin(exited, "the start with --env demo", () => out);

    const broken = spawn(process.execPath, ["--import", "tsx", "edge/local/main.ts", "--env", "broken"], {
      env: { ...process.env, ...settings },
      stdio: ["ignore", "pipe", "pipe"],
    });
    endWhenDone(broken);
    let said = "";
    broken.stdout.on("data", (d) => (said += d));
    const brokenExited = new Promise((r) => broken.once("exit", r));
    await expect.poll(() => said, { timeout: 30_000, interval: 200 }).toContain("--env broken: not valid, nothing started");
    expect(said).toContain("--env broken: --max_train_steps: set --max_train_steps or --num_train_epochs (a positive number)");
    expect(said).toContain("--env broken: --validation_external_script: required with --validation_method external-script");
    broken.kill("SIGTERM");
    await exitsWithin(brokenExited, "the start with --env broken", () => said);
  }, 240_000); // three starts of the whole stack, four waits of up to 30 s and three stops of up to 20 s: a hang guard above their sum

  it("exits 0 on SIGINT when run directly", async () => {
    const port = await freePort();
    const run = start({ SERVICE_HOST: "127.0.0.1", SERVICE_PORT: String(port), SERVICE_DATA_DIR: tempDataDir() });
    await expect.poll(() => run.output().stderr, { timeout: 30_000, interval: 200 }).toContain("Training service is up");
    const processes = descendants(run.child.pid!);
    run.child.kill("SIGINT");
    expect(await run.exited).toBe(0);
    await expect.poll(() => processes.filter((pid) => existsSync(`/proc/${pid}`)), { timeout: 5_000 }).toEqual([]);
  });

  it("says in one line that the port is taken", async () => {
    const blocker: Server = createServer();
    await new Promise<void>((done) => blocker.listen(0, "127.0.0.1", done));
    const { port } = blocker.address() as AddressInfo;
    try {
      const run = start({ SERVICE_HOST: "127.0.0.1", SERVICE_PORT: String(port), SERVICE_DATA_DIR: tempDataDir() });
      expect(await run.exited).toBe(1);
      expect(run.output().stderr).toBe(`error: port ${port} on 127.0.0.1 is already in use; stop the other process or set SERVICE_PORT\n`);
    } finally {
      blocker.close();
    }
  });

  it("says in one line that the data directory is not writable", async () => {
    const run = start({ SERVICE_HOST: "127.0.0.1", SERVICE_PORT: "0", SERVICE_DATA_DIR: "/proc/version/data" });
    expect(await run.exited).toBe(1);
    expect(run.output().stderr).toMatch(
      /^error: data directory \/proc\/version\/data is not writable \(\w+\); set SERVICE_DATA_DIR to a writable directory\n$/,
    );
  });

  it("names a bad setting instead of starting", async () => {
    const run = start({ SERVICE_PORT: "eighty" });
    expect(await run.exited).toBe(1);
    expect(run.output().stderr).toBe(`error: SERVICE_PORT must be a port number from 0 to 65535, not "eighty"\n`);
  });
});
