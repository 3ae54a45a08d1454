// The sandbox a box runs trainers and scripts in (README "Security"), against the real stack
// with real runners and real bubblewrap: npm start's own local runner, a box that allows raw
// commands, a box with the sandbox off, and a box whose bubblewrap is missing. What a hostile
// environment tries (writing outside its job directory, reading the database, another job's
// files, the runner's token) fails, and the job's events say so.
import type { ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer as createHttpServer, type Server as HttpServer } from "node:http";
import { createServer, type AddressInfo, type Server } from "node:net";
import { networkInterfaces, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { findProgram } from "../../runner/agent/sandbox";
import { startRemoteRunner, stopRunners } from "../helpers/runner-process";
import { setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";
import { until as waitUntil } from "../helpers/wait";
import { prerequisite } from "../helpers/prerequisites";

const HAS_BWRAP = prerequisite("bubblewrap (bwrap)", findProgram("bwrap", process.env.PATH ?? "") !== null);
const PROBE = resolve("test/fakes/sandbox-probe");
const ECHO_ARGS = resolve("test/fakes/echo-args");
const temp = (name: string) => mkdtempSync(join(tmpdir(), `sandbox-${name}-`));
const localWork = temp("local");
const rawWork = temp("raw");
const offWork = temp("off");
const missingWork = temp("missing");
const host = temp("host"); // configs, and where markers would land outside any job
// The host's secrets, outside /tmp (the sandbox's /tmp is its own anyway), readable by anyone:
// only the sandbox keeps them from a trainer.
const outside = mkdtempSync(join(existsSync("/var/tmp") ? "/var/tmp" : process.cwd(), "sandbox-secrets-"));
const netWork = temp("net");
const secrets = {
  dir: join(outside, "secrets"),
  hfToken: join(outside, "secrets", "HF_TOKEN"),
  tokenFile: join(outside, "vault-token"),
  home: join(outside, "home"),
  sshKey: join(outside, "home", ".ssh", "id_ed25519"),
  cliConfig: join(outside, "home", ".config", "training-service", "config.json"),
  runnerConfig: join(outside, "local.json"),
};
/** This machine's first address on a network (not loopback): a LAN service lives there. */
const lanAddress = Object.values(networkInterfaces())
  .flat()
  .find((a) => a && a.family === "IPv4" && !a.internal)?.address;
// A secret of the process the local runner lives in: it must never reach a trainer.
const CANARY = `canary-${randomBytes(8).toString("hex")}`;

let t: TestStack;
let admin: { key: string; cookie: string };
const runners: { name: string; child: ChildProcess; output: string }[] = [];
const tokens: Record<string, string> = {};
const auth = () => ({ key: admin.key });

const until = <T>(what: string, probe: () => Promise<T | undefined | null | false>, timeoutMs = 20_000) =>
  waitUntil(what, probe, {
    timeoutMs,
    context: () =>
      `runners:\n${runners.map((r) => `${r.name}: ${r.output}`).join("\n")}\nstack:\n${t.lines.filter((l) => l.includes("runner")).join("\n")}`,
  });

async function env(name: string, config: Record<string, unknown>) {
  expect((await t.call("POST", "/api/configs/environments", { json: { name }, auth: auth() })).status).toBe(201);
  expect((await t.call("PUT", `/api/configs/${name}`, { json: { config }, auth: auth() })).status).toBe(200);
}
/** Submits to npm start's local runner, or to the remote box labelled `box`. */
const submit = async (config_name: string, box?: string) =>
  (
    await t.call("POST", "/api/queue/submit", {
      json: box ? { config_name, target: "worker", worker_labels: { box } } : { config_name, target: "local" },
      auth: auth(),
    })
  ).body;
const entry = async (jobId: string) =>
  ((await t.call("GET", "/api/queue?include_completed=true&limit=1000", { auth: auth() })).body.jobs as any[]).find(
    (j) => j.job_id === jobId,
  );
const ended = (jobId: string) =>
  until(`job ${jobId} to end`, async () => {
    const e = await entry(jobId);
    return ["completed", "failed"].includes(e?.status) && e;
  });
const events = async (jobId: string) =>
  (await t.call("GET", `/api/training/events?job_id=${jobId}`, { auth: auth() })).body.events as any[];

/** A remote runner (runner/agent/main.ts) with its own config file, taking jobs labelled box=<name>. */
async function startRemote(name: string, config: Record<string, unknown>) {
  const runner = await startRemoteRunner(t, auth(), name, config, host);
  tokens[name] = runner.token;
  runners.push(runner);
  return runner;
}

let loopbackService: Server;
let lanService: HttpServer;
const portOf = (server: Server | HttpServer) => (server.address() as AddressInfo).port;

describe.skipIf(!HAS_BWRAP)("the sandbox", () => {
  beforeAll(async () => {
    for (const [path, text] of [
      [secrets.hfToken, "hf_secret"],
      [secrets.tokenFile, "vault-secret"],
      [secrets.sshKey, "-----BEGIN OPENSSH PRIVATE KEY-----"],
      [secrets.cliConfig, '{"api_key":"sk_secret"}'],
    ] as const) {
      mkdirSync(join(path, ".."), { recursive: true });
      writeFileSync(path, text, { mode: 0o644 });
    }
    for (const dir of [
      outside,
      secrets.dir,
      secrets.home,
      join(secrets.home, ".ssh"),
      join(secrets.home, ".config"),
      join(secrets.cliConfig, ".."),
    ])
      chmodSync(dir, 0o755);
    // A service on the host's loopback, and one on its network: a trainer must reach neither.
    loopbackService = createServer((socket) => socket.end("loopback service\n")).listen(0, "127.0.0.1");
    lanService = createHttpServer((_, res) => res.end("lan service\n")).listen(0, "0.0.0.0");
    // npm start's local runner, configured as npm start does it (RUNNER_CONFIG, its environment).
    const localConfig = secrets.runnerConfig;
    writeFileSync(
      localConfig,
      JSON.stringify({ trainers: { probe: [PROBE, "--job", "{job_dir}"] }, scripts: [PROBE, ECHO_ARGS], work_dir: localWork }),
      { mode: 0o644 },
    );
    t = await startTestStack(undefined, undefined, {
      localRunner: true,
      runnerConfig: localConfig,
      runnerEnv: {
        ...process.env,
        SANDBOX_CANARY: CANARY,
        SERVICE_SECRETS_DIR: secrets.dir,
        VAULT_TOKEN_FILE: secrets.tokenFile,
        HOME: secrets.home,
      },
    });
    admin = await setUpAdmin(t);
    await Promise.all([
      startRemote("net", {
        trainers: { probe: [PROBE] },
        work_dir: netWork,
        hide: [t.dataDir],
        allow_hosts: [lanAddress ?? "lan.invalid", "localhost"],
      }),
      startRemote("raw", { allow_raw_commands: true, work_dir: rawWork, hide: [t.dataDir], run_as: "nobody" }),
      startRemote("off", { sandbox: "off", work_dir: offWork }),
      startRemote("missing", { bwrap: "/no/such/bwrap", trainers: { probe: [PROBE] }, scripts: [ECHO_ARGS], work_dir: missingWork }),
    ]);
    await until("the runners to register", async () => runners.every((r) => r.output.includes("registered as worker")));
  });
  afterAll(async () => {
    await stopRunners(runners);
    await t?.stop();
    loopbackService?.close();
    lanService?.close();
    for (const dir of [localWork, rawWork, offWork, missingWork, netWork, host, outside]) rmSync(dir, { recursive: true, force: true });
  });

  it("npm start's local runner keeps job directories in its work_dir, outside the data directory, and sandboxes them", async () => {
    await env("plain-demo", { "--trainer": "demo", "--num_processes": 0, "--max_train_steps": 2, "--demo_step_ms": 10 });
    const job = await submit("plain-demo");
    expect((await ended(job.job_id)).status).toBe("completed");
    expect(existsSync(join(localWork, "jobs", job.job_id, "output.log"))).toBe(true);
    expect(existsSync(join(t.dataDir, "runner"))).toBe(false);
    expect(t.lines.some((l) => /runner: trainers and scripts run sandboxed by \S*bwrap/.test(l))).toBe(true);
  });

  it("a declared trainer completes sandboxed, and cannot write outside its job directory, read the database or another job's files, or see the runner's environment", async () => {
    await env("other-job", { "--trainer": "demo", "--num_processes": 0, "--max_train_steps": 1, "--demo_step_ms": 10 });
    const other = await submit("other-job");
    await ended(other.job_id);
    const database = join(t.dataDir, "service.db");
    const tmpMarker = `/tmp/sandbox-marker-${randomBytes(6).toString("hex")}`;
    const outside = [
      join(t.dataDir, "marker"),
      join(localWork, "marker"),
      join(localWork, "jobs", other.job_id, "marker"),
      tmpMarker,
      resolve("sandbox-marker"),
      join(host, "marker"),
    ];
    const otherLog = join(localWork, "jobs", other.job_id, "output.log");
    await env("probe", {
      "--trainer": "probe",
      "--num_processes": 0,
      "--probe_write": JSON.stringify([...outside, "inside.txt"]),
      "--probe_read": JSON.stringify([database, otherLog]),
    });
    const job = await submit("probe");
    expect((await ended(job.job_id)).status).toBe("completed");
    const jobDir = join(localWork, "jobs", job.job_id);
    const result = (await events(job.job_id)).find((e) => e.type === "probe.result").data;
    // The data directory and the work directory are hidden and read-only; the rest of the root
    // is read-only; /tmp is the trainer's own. Only its job directory keeps what it writes.
    expect(result.writes).toEqual({
      [outside[0]!]: "EROFS",
      [outside[1]!]: "EROFS",
      [outside[2]!]: "ENOENT",
      [tmpMarker]: "ok",
      [outside[4]!]: "EROFS",
      [outside[5]!]: "ENOENT",
      "inside.txt": "ok",
    });
    expect(result.reads).toEqual({ [database]: "ENOENT", [otherLog]: "ENOENT" });
    expect(result.cwd).toBe(jobDir);
    for (const marker of outside) expect(existsSync(marker)).toBe(false);
    expect(readFileSync(join(jobDir, "inside.txt"), "utf8")).toBe("written from the sandbox");
    // The trainer's environment is the allowlist: nothing of the process the runner lives in.
    const seen = JSON.parse(readFileSync(join(jobDir, "env.json"), "utf8")) as Record<string, string>;
    expect(Object.keys(seen).sort()).toEqual([
      "CUDA_VISIBLE_DEVICES",
      "HOME",
      "HTTPS_PROXY",
      "HTTP_PROXY",
      "NO_PROXY",
      "PATH",
      "PWD",
      "SIMPLETUNER_ACCELERATE_SIGNAL_FILE",
      "TERM",
      "TRAINER_CALLBACK_URL",
      "TRAINER_JOB_ID",
      "TRAINER_OUTPUT_DIR",
      "TRAINER_STORAGE_ACCESS_KEY_ID",
      "TRAINER_STORAGE_BUCKET",
      "TRAINER_STORAGE_ENDPOINT_URL",
      "TRAINER_STORAGE_REGION",
      "TRAINER_STORAGE_SECRET_ACCESS_KEY",
      "http_proxy",
      "https_proxy",
      "no_proxy",
    ]);
    // Its proxy, and a callback URL holding a secret of the job's own.
    expect(seen).toMatchObject({ HTTPS_PROXY: "http://127.0.0.1:47002", NO_PROXY: "127.0.0.1,localhost,::1" });
    expect(seen.TRAINER_CALLBACK_URL).toMatch(/^http:\/\/127\.0\.0\.1:47001\/[A-Za-z0-9_-]{32}\/$/);
    expect(seen).toMatchObject({ HOME: jobDir, TRAINER_JOB_ID: job.job_id, TRAINER_STORAGE_BUCKET: job.job_id });
    expect(JSON.stringify(seen)).not.toContain(CANARY);
  });

  it("a trainer sees none of the host's secrets and reaches nothing but its own job: not the host's loopback, its network, a metadata address, another job's callback; its checkpoint events name no path outside its job", async () => {
    // The victim: another researcher's job, alive on the same box.
    await t.call("POST", "/api/queue/concurrency", { json: { local_job_max_concurrent: 2 }, auth: auth() });
    await env("victim", { "--trainer": "probe", "--num_processes": 0, "--probe_sleep_ms": 60_000 });
    const victim = await submit("victim");
    const victimEnv = join(localWork, "jobs", victim.job_id, "env.json");
    await until(
      "the victim to run",
      async () => existsSync(victimEnv) && (await events(victim.job_id)).some((e) => e.type === "probe.result"),
    );
    const victimCallback = (JSON.parse(readFileSync(victimEnv, "utf8")) as Record<string, string>).TRAINER_CALLBACK_URL!;
    const lan = `${lanAddress}:${portOf(lanService)}`;
    await env("attacker", {
      "--trainer": "probe",
      "--num_processes": 0,
      "--probe_read": JSON.stringify([secrets.hfToken, secrets.tokenFile, secrets.sshKey, secrets.cliConfig, secrets.runnerConfig]),
      "--probe_list": JSON.stringify([secrets.home, secrets.dir]),
      "--probe_connect": JSON.stringify([`127.0.0.1:${portOf(loopbackService)}`, lan, "169.254.169.254:80"]),
      "--probe_post": JSON.stringify([victimCallback, new URL("/", victimCallback).href]),
      "--probe_proxy": JSON.stringify([`http://${lan}/`, "http://169.254.169.254/latest/meta-data/"]),
      "--probe_emit": JSON.stringify([{ type: "checkpoint.saved", data: { path: "/etc", step: 1 } }]),
      "--post_checkpoint_script": `${ECHO_ARGS} {local_checkpoint_path}`,
    });
    const attacker = await submit("attacker");
    expect((await ended(attacker.job_id)).status).toBe("completed");
    const seen = await events(attacker.job_id);
    const result = seen.find((e) => e.type === "probe.result").data;
    expect(result.uid).toBe(65534); // nobody: the runner is root and its config names no run_as
    // Hidden folders are empty; a hidden file cannot be opened.
    expect(result.reads).toEqual({
      [secrets.hfToken]: "ENOENT",
      [secrets.tokenFile]: "EACCES",
      [secrets.sshKey]: "ENOENT",
      [secrets.cliConfig]: "ENOENT",
      [secrets.runnerConfig]: "EACCES",
    });
    expect(result.lists).toEqual({ [secrets.home]: [], [secrets.dir]: [] });
    // A network of its own: nothing of the host's loopback, nothing beyond.
    expect(result.connects).toEqual({
      [`127.0.0.1:${portOf(loopbackService)}`]: "ECONNREFUSED",
      [lan]: "ENETUNREACH",
      "169.254.169.254:80": "ENETUNREACH",
    });
    // Its proxy lets nothing through on a box that allows no host, and says so.
    expect(result.proxied).toEqual({ [`http://${lan}/`]: 403, "http://169.254.169.254/latest/meta-data/": 403 });
    expect(seen.filter((e) => e.type === "network.refused").map((e) => e.data.target)).toEqual(
      expect.arrayContaining([lan, "169.254.169.254"]),
    );
    // The victim's callback URL leads to the attacker's own callback, which wants its own secret.
    expect(result.posts).toEqual({ [victimCallback]: 404, [new URL("/", victimCallback).href]: 404 });
    // A checkpoint event naming a path outside the job gives no script that path.
    expect(seen.find((e) => e.type === "script.refused")).toMatchObject({
      title: "post_checkpoint script not run: the checkpoint path it would be given (/etc) is outside the job's directory",
    });
    expect(seen.filter((e) => e.type === "script.output")).toEqual([]);
    // Nothing reached the victim, which trains on.
    const victimEvents = await events(victim.job_id);
    expect(victimEvents.map((e) => e.message)).not.toContain("forged by another job");
    expect(seen.map((e) => e.message)).not.toContain("forged by another job");
    expect((await entry(victim.job_id)).status).toBe("running");
    expect((await t.call("POST", "/api/training/cancel", { json: { job_id: victim.job_id }, auth: auth() })).status).toBe(200);
    await t.call("POST", "/api/queue/process", { auth: auth() }); // a cancelled running local job pauses local dispatch until a queue pass
  });

  it("reaches a host the box allows by name through its proxy, and nothing else, not even an allowed name that resolves to loopback", async () => {
    expect(lanAddress, "this machine has no network address besides loopback").toBeDefined();
    const lan = `${lanAddress}:${portOf(lanService)}`;
    await env("allowed", {
      "--trainer": "probe",
      "--num_processes": 0,
      "--probe_connect": JSON.stringify([lan]),
      "--probe_proxy": JSON.stringify([`http://${lan}/`, `http://localhost:${portOf(loopbackService)}/`, "http://169.254.169.254/"]),
    });
    const job = await submit("allowed", "net");
    expect((await ended(job.job_id)).status).toBe("completed");
    const seen = await events(job.job_id);
    const result = seen.find((e) => e.type === "probe.result").data;
    expect(result.connects).toEqual({ [lan]: "ENETUNREACH" }); // only through the proxy
    expect(result.proxied).toEqual({
      [`http://${lan}/`]: 200,
      [`http://localhost:${portOf(loopbackService)}/`]: 403,
      "http://169.254.169.254/": 403,
    });
    expect(seen.find((e) => e.type === "network.refused" && e.data.target.startsWith("localhost"))).toMatchObject({
      data: { reason: expect.stringMatching(/resolves to (127\.0\.0\.1|::1), a loopback or link-local address/) },
    });
  });

  it("a raw --trainer_command on a box that allows them runs sandboxed as the run_as user, without the runner's token", async () => {
    const database = join(t.dataDir, "service.db");
    await env("raw-probe", {
      "--num_processes": 0,
      "--trainer_command": JSON.stringify([PROBE]),
      "--probe_write": JSON.stringify([join(rawWork, "marker"), join(t.dataDir, "marker")]),
      "--probe_read": JSON.stringify([database]),
    });
    const job = await submit("raw-probe", "raw");
    expect((await ended(job.job_id)).status).toBe("completed");
    const result = (await events(job.job_id)).find((e) => e.type === "probe.result").data;
    expect(result.writes).toEqual({ [join(rawWork, "marker")]: "EROFS", [join(t.dataDir, "marker")]: "EROFS" });
    expect(result.reads).toEqual({ [database]: "ENOENT" });
    expect(result.uid).toBe(65534); // run_as "nobody"
    expect(existsSync(join(rawWork, "marker"))).toBe(false);
    const dumped = readFileSync(join(rawWork, "jobs", job.job_id, "env.json"), "utf8");
    expect(Object.keys(JSON.parse(dumped))).not.toContain("RUNNER_TOKEN");
    expect(dumped).not.toContain(tokens.raw!);
  });

  it("a trainer (run_as, sandboxed) reads its signal file; swapping it and its log for links to the runner's files changes nothing outside", async () => {
    const targets = [join(host, "victim-log"), join(host, "victim-signal")];
    for (const target of targets) writeFileSync(target, "untouched\n");
    const trainer = `
      const fs = require("node:fs");
      const signals = process.env.SIMPLETUNER_ACCELERATE_SIGNAL_FILE;
      console.log(JSON.stringify({ type: "signals.read", data: { counters: JSON.parse(fs.readFileSync(signals, "utf8")), uid: process.getuid() } }));
      fs.rmSync("output.log");
      fs.symlinkSync(${JSON.stringify(targets[0])}, "output.log");
      fs.rmSync(signals, { force: true });
      fs.symlinkSync(${JSON.stringify(targets[1])}, signals);
      console.log(JSON.stringify({ type: "links.ready" }));
      console.log("appended to whatever output.log points at?");
      setTimeout(() => console.log("done"), 1500);`;
    await env("link-swapper", { "--num_processes": 0, "--trainer_command": JSON.stringify([process.execPath, "-e", trainer, "--"]) });
    const job = await submit("link-swapper", "raw");
    await until("the links", async () => (await events(job.job_id)).some((e) => e.type === "links.ready"));
    // Visible and readable inside the sandbox, for the run_as user.
    expect((await events(job.job_id)).find((e) => e.type === "signals.read").data).toEqual({
      counters: { manual_validation: 0, manual_checkpoint: 0 },
      uid: 65534,
    });
    // A command makes the runner write the signal file while the link is there: it replaces the link.
    expect((await t.call("POST", "/api/training/validation/run", { json: { job_id: job.job_id }, auth: auth() })).status).toBe(200);
    expect((await ended(job.job_id)).status).toBe("completed");
    expect((await events(job.job_id)).map((e) => e.message)).toEqual(
      expect.arrayContaining(["appended to whatever output.log points at?", "done"]),
    );
    for (const target of targets) expect(readFileSync(target, "utf8")).toBe("untouched\n");
  });

  it("does not run --trainer_command on a box without allow_raw_commands: the job fails saying why, nothing ran", async () => {
    const marker = join(host, "raw-marker");
    await env("raw-refused", { "--num_processes": 0, "--trainer_command": JSON.stringify(["/usr/bin/touch", marker]) });
    const job = await submit("raw-refused");
    const failed = await ended(job.job_id);
    expect(failed).toMatchObject({
      status: "failed",
      error_message:
        "--trainer_command is not run on this box: its runner config does not set allow_raw_commands; pick one of its trainers with --trainer (simpletuner, demo, probe)",
    });
    expect(existsSync(marker)).toBe(false);
    expect(existsSync(join(localWork, "jobs", job.job_id, "output.log"))).toBe(false);
  });

  it("gives no box a job naming a trainer it does not have: the job waits, saying which trainers the box runs", async () => {
    await env("unknown-trainer", { "--trainer": "flux-turbo", "--num_processes": 0 });
    const job = await submit("unknown-trainer");
    expect(job).toMatchObject({ status: "queued", wait_reason: "trainer_unavailable" });
    expect((await entry(job.job_id)).wait_message).toBe('the local GPU box cannot run trainer "flux-turbo" (it runs demo, probe)');
    expect((await t.call("POST", "/api/training/cancel", { json: { job_id: job.job_id }, auth: auth() })).status).toBe(200);
    await t.call("POST", "/api/queue/process", { auth: auth() });
  });

  it("does not run a script the box does not declare (script.refused names it); a declared one runs sandboxed and its output is an event", async () => {
    const refusedMarker = join(host, "script-marker");
    const probeMarker = join(localWork, "script-marker");
    const database = join(t.dataDir, "service.db");
    await env("scripts", {
      "--trainer": "demo",
      "--num_processes": 0,
      "--max_train_steps": 2,
      "--demo_step_ms": 10,
      "--checkpointing_steps": 2,
      "--post_checkpoint_script": `/usr/bin/touch ${refusedMarker}`,
      "--validation_method": "external-script",
      "--validation_steps": 2,
      "--validation_external_script": `${PROBE} --probe_write '${JSON.stringify([probeMarker])}' --probe_read '${JSON.stringify([database])}'`,
    });
    const job = await submit("scripts");
    expect((await ended(job.job_id)).status).toBe("completed");
    const all = await events(job.job_id);
    const refused = all.find((e) => e.type === "script.refused");
    expect(refused, `events: ${all.map((e) => e.type).join(", ")}`).toMatchObject({
      title: "post_checkpoint script /usr/bin/touch not run: this box's runner config does not declare it in scripts",
      data: { script: "post_checkpoint", program: "/usr/bin/touch" },
    });
    expect(existsSync(refusedMarker)).toBe(false);
    const output = all.find((e) => e.type === "script.output" && e.data.script === "validation");
    expect(JSON.parse(output.message)).toMatchObject({
      type: "probe.result",
      data: { writes: { [probeMarker]: "EROFS" }, reads: { [database]: "ENOENT" } },
    });
    expect(all.find((e) => e.type === "script.finished" && e.data.script === "validation")).toMatchObject({ data: { exit_code: 0 } });
    expect(existsSync(probeMarker)).toBe(false);
  });

  it('with sandbox "off", says so at start and warns on every job', async () => {
    expect(runners.find((r) => r.name === "off")!.output).toContain("WARNING: sandbox is off in the runner config");
    await env("off-demo", { "--trainer": "demo", "--num_processes": 0, "--max_train_steps": 1, "--demo_step_ms": 10 });
    const job = await submit("off-demo", "off");
    expect((await ended(job.job_id)).status).toBe("completed");
    expect((await events(job.job_id))[0]).toMatchObject({
      type: "sandbox.off",
      level: "warning",
      title: 'This box runs trainers and scripts without a sandbox (sandbox "off" in its runner config)',
    });
  });

  it("without bubblewrap, says so at start and runs only the built-in trainers and declared scripts", async () => {
    expect(runners.find((r) => r.name === "missing")!.output).toContain(
      "WARNING: bubblewrap (/no/such/bwrap) is not installed on this box: only the built-in trainers (simpletuner, demo) and the declared scripts will run",
    );
    // Its declared trainer is not available there, and the box says so: the job waits for a box that can run it.
    const missing = ((await t.call("GET", "/api/system/workers", { auth: auth() })).body.workers as any[]).find(
      (w) => w.name === "box-missing",
    );
    expect(missing.trainers.find((x: any) => x.name === "probe")).toEqual({
      name: "probe",
      available: false,
      detail: "bubblewrap is not installed on this box (its sandbox)",
    });
    await env("missing-probe", { "--trainer": "probe", "--num_processes": 0 });
    const refused = await submit("missing-probe", "missing");
    expect(refused).toMatchObject({ status: "queued", wait_reason: "trainer_unavailable" });
    await new Promise((r) => setTimeout(r, 500));
    expect(existsSync(join(missingWork, "jobs", refused.job_id))).toBe(false);
    expect((await t.call("POST", "/api/training/cancel", { json: { job_id: refused.job_id }, auth: auth() })).status).toBe(200);
    await env("missing-demo", {
      "--trainer": "demo",
      "--num_processes": 0,
      "--max_train_steps": 2,
      "--demo_step_ms": 10,
      "--checkpointing_steps": 1,
      "--post_checkpoint_script": `${ECHO_ARGS} {global_step}`,
    });
    const job = await submit("missing-demo", "missing");
    expect((await ended(job.job_id)).status).toBe("completed");
    const outputs = (await events(job.job_id)).filter((e) => e.type === "script.output").map((e) => JSON.parse(e.message));
    expect(outputs).toEqual(expect.arrayContaining([["1"], ["2"]]));
  });
});
