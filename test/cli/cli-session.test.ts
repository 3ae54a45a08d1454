// The `jobs` binary's session commands against the real stack with its local runner (no GPUs:
// the demo trainer's CPU jobs): login (key stored 0600, password never), whoami and where its
// settings came from, logs of a finished job page by page, logs --follow until the job ends, and
// the completion scripts, sourced in a real bash.
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jobs, tempConfigHome } from "../helpers/cli";
import { createUserWithKey, setUpAdmin, startStackWithLocalRunner, type TestStack } from "../helpers/stack";
import { until } from "../helpers/wait";

let t: TestStack;
let admin: { key: string; cookie: string };
let rita: { key: string; id: number };
let olga: { key: string; id: number };
const runnerDir = mkdtempSync(join(tmpdir(), "cli-session-runner-"));
const RITA_PASSWORD = "rita-password"; // createUserWithKey's password for "rita"

const configFileIn = (home: string) => join(home, "training-service", "config.json");
const asRita = () => ({ SERVICE_URL: t.base, SERVICE_API_KEY: rita.key });

async function environment(name: string, changes: Record<string, unknown>) {
  expect(
    (await t.call("POST", "/api/configs/environments", { json: { name, from_example: "demo" }, auth: { key: admin.key } })).status,
  ).toBe(201);
  const { config } = (await t.call("GET", `/api/configs/${name}`, { auth: { key: admin.key } })).body;
  expect(
    (await t.call("PUT", `/api/configs/${name}`, { json: { config: { ...config, ...changes } }, auth: { key: admin.key } })).status,
  ).toBe(200);
}
const submit = async (config_name: string): Promise<string> => {
  const reply = await t.call("POST", "/api/queue/submit", { json: { config_name }, auth: { key: rita.key } });
  expect(reply.status, reply.text).toBeLessThan(300);
  return reply.body.job_id;
};
const apiEvents = async (jobId: string) => {
  const events: any[] = [];
  for (let since = 0; ;) {
    const page = (await t.call("GET", `/api/training/events?job_id=${jobId}&since_index=${since}&limit=1000`, { auth: { key: rita.key } }))
      .body;
    if (!page.events.length) return events;
    events.push(...page.events);
    since = page.next_index;
  }
};
const statusOf = async (jobId: string) =>
  ((await t.call("GET", "/api/queue?include_completed=true&limit=1000", { auth: { key: rita.key } })).body.jobs as any[]).find(
    (j) => j.job_id === jobId,
  )?.status;
const finished = (jobId: string) =>
  until(`job ${jobId} to end`, async () => ["completed", "failed", "cancelled"].includes(await statusOf(jobId)), { timeoutMs: 60_000 });

beforeAll(async () => {
  t = await startStackWithLocalRunner(runnerDir);
  admin = await setUpAdmin(t);
  rita = await createUserWithKey(t, { key: admin.key }, "researcher", "rita");
  olga = await createUserWithKey(t, { key: admin.key }, "researcher", "olga");
  // Over 500 events (one page's default limit) in a second or two; and one that runs a few seconds.
  await environment("many-events", { "--max_train_steps": 560, "--demo_step_ms": 0, "--validation_steps": 0, "--checkpointing_steps": 0 });
  await environment("slow", { "--max_train_steps": 25, "--demo_step_ms": 120, "--validation_steps": 10 });
}, 60_000);
afterAll(async () => {
  await t?.stop();
  rmSync(runnerDir, { recursive: true, force: true });
});

/** A proxy in front of the stack that keeps every cookie the service sets. */
async function cookieRecorder(): Promise<{ url: string; cookies: string[]; server: Server }> {
  const cookies: string[] = [];
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const headers = Object.fromEntries(
      Object.entries(req.headers).filter(([name]) => name !== "host" && name !== "content-length"),
    ) as Record<string, string>;
    const answer = await fetch(t.base + req.url, {
      method: req.method,
      headers,
      body: chunks.length ? Buffer.concat(chunks) : undefined,
    });
    const setCookie = answer.headers.getSetCookie();
    cookies.push(...setCookie.map((line) => line.split(";")[0]!));
    const body = Buffer.from(await answer.arrayBuffer());
    res.writeHead(answer.status, { "content-type": answer.headers.get("content-type") ?? "application/json", "set-cookie": setCookie });
    res.end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, cookies, server };
}

describe("jobs login", () => {
  it("with --password-stdin creates a key, stores url, key and username 0600 in a 0700 directory, never the password", async () => {
    const home = tempConfigHome();
    const file = configFileIn(home);
    const run = await jobs(["login", "--url", t.base, "--username", "rita", "--password-stdin"], {
      env: { XDG_CONFIG_HOME: home },
      input: `${RITA_PASSWORD}\n`,
    });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toBe("");
    const stored = JSON.parse(readFileSync(file, "utf8"));
    expect(Object.keys(stored).sort()).toEqual(["api_key", "url", "username"]);
    expect(stored).toMatchObject({ url: t.base, username: "rita" });
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(statSync(join(home, "training-service")).mode & 0o777).toBe(0o700);
    expect(readFileSync(file, "utf8")).not.toContain(RITA_PASSWORD);
    // The key is rita's, named after this machine; only its prefix was printed.
    const keys = (await t.call("GET", "/api/cloud/auth/api-keys", { auth: { key: stored.api_key } })).body.keys as any[];
    const made = keys.find((k) => stored.api_key.startsWith(k.prefix) && k.name === `jobs-cli@${hostname()}`);
    expect(made).toBeDefined();
    expect(run.stderr).toBe(`Logged in to ${t.base} as rita; API key ${made.prefix}… saved to ${file}\n`);
    expect(run.stderr).not.toContain(stored.api_key);

    // whoami with no flags and no environment reads the stored URL and key.
    const whoami = await jobs(["whoami"], { env: { XDG_CONFIG_HOME: home } });
    expect(whoami.code, whoami.stderr).toBe(0);
    expect(whoami.stdout).toBe(
      [
        "user:     rita <rita@example.com>",
        "level:    researcher",
        "team:     none",
        `service:  ${t.base}`,
        `url from: ${file}`,
        `key from: ${file}`,
        "",
      ].join("\n"),
    );
  });

  it("logs its session out once the key exists: the login's cookie no longer works", async () => {
    const proxy = await cookieRecorder();
    try {
      const run = await jobs(
        ["login", "--url", proxy.url, "--username", "rita@example.com", "--password-stdin", "--key-name", "ci box", "--format", "json"],
        {
          input: RITA_PASSWORD,
        },
      );
      expect(run.code, run.stderr).toBe(0);
      const answer = run.json();
      expect(Object.keys(answer).sort()).toEqual(["config_file", "key_prefix", "url", "username"]);
      expect(answer).toMatchObject({ url: proxy.url, username: "rita" });
      const session = proxy.cookies.find((c) => /st_session=./.test(c));
      expect(session).toBeDefined();
      expect((await t.call("GET", "/api/users/me", { auth: { cookie: session } })).status).toBe(401);
      const keys = (await t.call("GET", "/api/cloud/auth/api-keys", { auth: { key: rita.key } })).body.keys as any[];
      expect(keys.filter((k) => k.name === "ci box").map((k) => k.prefix)).toEqual([answer.key_prefix]);
    } finally {
      proxy.server.close();
    }
  });

  it("a wrong password is exit 1 with the service's detail, and the config file is left as it was", async () => {
    const refused = await t.call("POST", "/api/cloud/auth/login", { json: { username: "rita", password: "wrong-password" } });
    expect(refused.status).toBe(401);
    const home = tempConfigHome();
    const none = await jobs(["login", "--url", t.base, "--username", "rita", "--password-stdin"], {
      env: { XDG_CONFIG_HOME: home },
      input: "wrong-password\n",
    });
    expect([none.code, none.stdout, none.stderr]).toEqual([1, "", `error: ${refused.body.detail}\n`]);
    expect(existsSync(configFileIn(home))).toBe(false);

    const before = JSON.stringify({ url: "http://127.0.0.1:9", api_key: "st_old", username: "old" });
    const file = join(home, "kept.json");
    writeFileSync(file, before, { mode: 0o600 });
    const kept = await jobs(["login", "--url", t.base, "--username", "rita", "--password-stdin"], {
      env: { JOBS_CONFIG: file },
      input: "wrong-password",
    });
    expect(kept.code).toBe(1);
    expect(readFileSync(file, "utf8")).toBe(before);
  });

  it("without a terminal and without --password-stdin it is a usage error (exit 2) that writes nothing", async () => {
    const home = tempConfigHome();
    const run = await jobs(["login", "--url", t.base, "--username", "rita"], { env: { XDG_CONFIG_HOME: home }, input: RITA_PASSWORD });
    expect(run.code).toBe(2);
    expect(run.stdout).toBe("");
    expect(run.stderr).toContain("--password-stdin");
    expect(existsSync(configFileIn(home))).toBe(false);
    const empty = await jobs(["login", "--url", t.base, "--username", "rita", "--password-stdin"], {
      env: { XDG_CONFIG_HOME: home },
      input: "",
    });
    expect([empty.code, empty.stderr]).toEqual([2, "error: no password on stdin\n"]);
    const badUrl = await jobs(["login", "--url", "ftp://x", "--username", "rita", "--password-stdin"], { input: "x" });
    expect([badUrl.code, badUrl.stderr]).toEqual([2, 'error: the service URL must start with http:// or https://, not "ftp://x"\n']);
  });
});

describe("jobs whoami", () => {
  it("prints the user, the service and where the URL and key came from: environment, flags; JSON holds the API's answer", async () => {
    const me = (await t.call("GET", "/api/users/me", { auth: { key: rita.key } })).body;
    const home = tempConfigHome();
    const fromEnv = await jobs(["whoami", "--format", "json"], { env: { ...asRita(), XDG_CONFIG_HOME: home } });
    expect(fromEnv.code, fromEnv.stderr).toBe(0);
    expect(fromEnv.json()).toEqual({ url: t.base, user: me, source: { url: "env", api_key: "env" }, config_file: configFileIn(home) });

    const fromFlags = await jobs(["whoami", "--url", t.base, "--api-key", rita.key, "--format", "json"], {
      env: { SERVICE_URL: "http://127.0.0.1:9" },
    });
    expect(fromFlags.json()).toMatchObject({ url: t.base, user: { username: "rita" }, source: { url: "flag", api_key: "flag" } });

    const text = await jobs(["whoami"], { env: asRita() });
    expect(text.stdout).toContain("url from: SERVICE_URL\nkey from: SERVICE_API_KEY\n");
    const mixed = await jobs(["whoami", "--api-key", rita.key], { env: { SERVICE_URL: t.base } });
    expect(mixed.stdout).toContain("url from: SERVICE_URL\nkey from: the --api-key flag\n");
  });

  it("not logged in is exit 2 with the hint; a wrong or revoked key is exit 1 with the service's detail", async () => {
    const nothing = await jobs(["whoami"]);
    expect([nothing.code, nothing.stdout, nothing.stderr]).toEqual([
      2,
      "",
      "error: no service URL: pass --url, set SERVICE_URL, or run `jobs login`\n",
    ]);
    const noKey = await jobs(["whoami"], { env: { SERVICE_URL: t.base } });
    expect([noKey.code, noKey.stderr]).toEqual([2, "error: no API key: pass --api-key, set SERVICE_API_KEY, or run `jobs login`\n"]);

    const refused = await t.call("GET", "/api/users/me", { auth: { key: "st_not_a_key" } });
    expect(refused.status).toBe(401);
    const wrong = await jobs(["whoami"], { env: { SERVICE_URL: t.base, SERVICE_API_KEY: "st_not_a_key" } });
    expect([wrong.code, wrong.stdout, wrong.stderr]).toEqual([1, "", `error: ${refused.body.detail}\n`]);
    const json = await jobs(["whoami", "--format", "json"], { env: { SERVICE_URL: t.base, SERVICE_API_KEY: "st_not_a_key" } });
    expect(json.code).toBe(1);
    expect(json.stdout).toBe("");
    expect(JSON.parse(json.stderr)).toEqual({ error: { status: 401, code: refused.body.code, detail: refused.body.detail } });
  });
});

describe("jobs logs", () => {
  let done: string;
  let events: any[];
  beforeAll(async () => {
    done = await submit("many-events");
    await finished(done);
    events = await apiEvents(done);
    expect(events.length).toBeGreaterThan(560);
  }, 90_000);

  it("of a finished job prints every event once, in order, over several pages: text lines and NDJSON", async () => {
    const text = await jobs(["logs", done], { env: asRita() });
    expect(text.code, text.stderr).toBe(0);
    expect(text.stderr).toBe("");
    const lines = text.stdout.trimEnd().split("\n");
    expect(lines).toHaveLength(events.length);
    lines.forEach((line, i) =>
      expect(line.startsWith(`${line.slice(0, 8)} ${events[i].type}`) && /^\d\d:\d\d:\d\d /.test(line), line).toBe(true),
    );
    const progress = events.filter((e) => e.type === "training.progress");
    // "step S/T loss L": L to four decimals, or four significant digits once it is tiny.
    const shown = lines
      .filter((l) => l.includes(" training.progress "))
      .map((l) => /^\d\d:\d\d:\d\d training\.progress step (\d+)\/560 loss (\S+)$/.exec(l));
    expect(shown.map((m) => Number(m?.[1]))).toEqual(progress.map((e) => e.data.step));
    shown.forEach((m, i) => expect(Number(m![2])).toBeCloseTo(progress[i].data.loss, 4));
    expect(text.stdout).not.toContain("data:image");
    expect(lines.find((l) => l.includes(" validation.completed "))).toMatch(
      / validation\.completed Validation done at step 560 \(1 image\)$/,
    );

    const json = await jobs(["logs", done, "--format", "json"], { env: asRita() });
    expect(json.code, json.stderr).toBe(0);
    expect(json.jsonLines()).toEqual(events);

    const since = await jobs(["logs", done, "--since", "550", "--format", "json"], { env: asRita() });
    expect(since.jsonLines()).toEqual(events.slice(550));
  });

  it("--follow of a running job prints each event once and ends by itself with the job's final status (exit 0)", async () => {
    const jobId = await submit("slow");
    const [json, text] = await Promise.all([
      jobs(["logs", jobId, "--follow", "--format", "json"], { env: asRita(), timeoutMs: 60_000 }),
      jobs(["logs", jobId, "-f"], { env: asRita(), timeoutMs: 60_000 }),
    ]);
    expect(await statusOf(jobId)).toBe("completed");
    const all = await apiEvents(jobId);
    expect(json.code, json.stderr).toBe(0);
    expect(json.stderr).toBe(`job ${jobId} ended: completed\n`);
    expect(json.jsonLines()).toEqual(all);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stderr).toBe(`job ${jobId} ended: completed\n`);
    expect(
      text.stdout
        .trimEnd()
        .split("\n")
        .map((line) => line.split(" ")[1]),
    ).toEqual(all.map((e) => e.type));
    expect(text.stdout).not.toContain("data:image");

    // Following a job that has already ended replays its log and ends at once.
    const again = await jobs(["logs", jobId, "--follow", "--since", "3", "--format", "json"], { env: asRita() });
    expect(again.code).toBe(0);
    expect(again.jsonLines()).toEqual(all.slice(3));
  }, 90_000);

  it("another user's job or an unknown one is exit 1 with the detail and nothing on stdout, followed or not", async () => {
    const theirs = await t.call("GET", `/api/training/events?job_id=${done}`, { auth: { key: olga.key } });
    expect(theirs.status).toBe(403);
    const asOlga = { SERVICE_URL: t.base, SERVICE_API_KEY: olga.key };
    for (const args of [
      ["logs", done],
      ["logs", done, "--follow"],
    ]) {
      const run = await jobs(args, { env: asOlga });
      expect([run.code, run.stdout, run.stderr], args.join(" ")).toEqual([1, "", `error: ${theirs.body.detail}\n`]);
    }
    const json = await jobs(["logs", done, "--follow", "--format", "json"], { env: asOlga });
    expect(json.stdout).toBe("");
    expect(JSON.parse(json.stderr)).toEqual({ error: { status: 403, code: "not_your_job", detail: theirs.body.detail } });
    const unknown = await t.call("GET", "/api/training/events?job_id=local-000000000000", { auth: { key: rita.key } });
    expect(unknown.status).toBe(404);
    const run = await jobs(["logs", "local-000000000000", "-f"], { env: asRita() });
    expect([run.code, run.stdout, run.stderr]).toEqual([1, "", `error: ${unknown.body.detail}\n`]);
  });

  it("refuses a --since that is not an event index (exit 2) and a missing job id", async () => {
    for (const since of ["-1", "abc", "1.5"]) {
      const run = await jobs(["logs", done, "--since", since], { env: asRita() });
      expect([run.code, run.stdout], since).toEqual([2, ""]);
      expect(run.stderr).toContain("--since must be an event index");
    }
    const missing = await jobs(["logs"], { env: asRita() });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("missing required argument 'job_id'");
  });
});

describe("jobs completion", () => {
  /** Runs bash's completion for the words typed (the last one being completed), with the script sourced. */
  const complete = (script: string, words: string[]) =>
    execFileSync(
      "bash",
      [
        "-c",
        `source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); _jobs_complete; printf '%s\\n' "\${COMPREPLY[@]}"`,
        "bash",
        script,
        ...words,
      ],
      { encoding: "utf8" },
    )
      .split("\n")
      .filter(Boolean);

  it("bash: sourced, completes commands, options and their values for both jobs and training-jobs", async () => {
    const run = await jobs(["completion", "bash"]);
    expect(run.code, run.stderr).toBe(0);
    const file = join(tempConfigHome(), "jobs.bash");
    writeFileSync(file, run.stdout);
    expect(execFileSync("bash", ["-c", `source "$1" && complete -p jobs training-jobs`, "bash", file], { encoding: "utf8" })).toBe(
      "complete -F _jobs_complete jobs\ncomplete -F _jobs_complete training-jobs\n",
    );
    expect(complete(file, ["jobs", "li"])).toEqual(["list"]);
    expect(complete(file, ["training-jobs", "lo"])).toEqual(["logs", "login"]);
    expect(complete(file, ["jobs", "list", "--fo"])).toEqual(["--format"]);
    expect(complete(file, ["jobs", "list", "--format", ""])).toEqual(["table", "json", "csv"]);
    expect(complete(file, ["jobs", "--format", "json", "who"])).toEqual(["whoami"]);
    expect(complete(file, ["jobs", "logs", "--fol"])).toEqual(["--follow"]);
    expect(complete(file, ["jobs", "completion", ""])).toEqual(["bash", "zsh"]);
    expect(complete(file, ["jobs", "logs", "--format", "=", "j"])).toEqual(["json"]);
  });

  it("zsh: a #compdef script defining _jobs for both names; an unknown shell is a usage error", async () => {
    const run = await jobs(["completion", "zsh"]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout.startsWith("#compdef jobs training-jobs\n")).toBe(true);
    expect(run.stdout).toContain("\n_jobs() {\n");
    expect(run.stdout).toContain("compdef _jobs jobs training-jobs");
    expect(run.stdout).toContain("'--format[output: a table for people, json for scripts, csv (jobs cost)]:format:(table json csv)'");
    expect(run.stdout).toContain("'logs:Print a job'\\''s events");
    expect(run.stdout).toContain("'(-f --follow)'{-f,--follow}'[");
    const zsh = ["/bin/zsh", "/usr/bin/zsh"].find((path) => existsSync(path));
    if (zsh) {
      const file = join(tempConfigHome(), "_jobs");
      writeFileSync(file, run.stdout);
      execFileSync(zsh, ["-n", file]);
    }

    const fish = await jobs(["completion", "fish"]);
    expect([fish.code, fish.stdout]).toEqual([2, ""]);
    expect(fish.stderr).toContain("error: command-argument value 'fish' is invalid for argument 'shell'. Allowed choices are bash, zsh.");
    const help = await jobs(["completion", "--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("source <(jobs completion bash)");
  });
});
