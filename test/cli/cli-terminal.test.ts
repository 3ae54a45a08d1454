// The `jobs` binary on a real terminal (a pseudo-terminal through node-pty, as a person runs it):
// colour and the table sized to the terminal's width (none with NO_COLOR), the interactive login
// whose password is never echoed, and the progress bar of `logs --follow`. The same commands
// without a terminal are in test/cli/cli-jobs.test.ts and test/cli/cli-session.test.ts.
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as pty from "node-pty";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tempConfigHome } from "../helpers/cli";
import { fakeSimpleTuner, removeFakeSimpleTuners } from "../helpers/simpletuner";
import { createUserWithKey, setUpAdmin, startStackWithLocalRunner, type TestStack } from "../helpers/stack";

let t: TestStack;
let admin: { key: string; cookie: string };
let rita: { key: string; id: number };
const runnerDir = mkdtempSync(join(tmpdir(), "cli-terminal-runner-"));
const ESC = "\x1b[";

interface Screen {
  code: number;
  output: string;
}

/**
 * Runs `jobs` on a pseudo-terminal `cols` wide; each `answers` entry is typed (with Enter) once
 * the output so far matches its prompt, in order.
 */
function onTerminal(
  args: string[],
  env: NodeJS.ProcessEnv,
  answers: { prompt: RegExp; reply: string }[] = [],
  cols = 120,
): Promise<Screen> {
  const term = pty.spawn(process.execPath, ["runner/cli/bin.mjs", ...args], {
    cols,
    rows: 40,
    cwd: process.cwd(),
    env: { PATH: process.env.PATH!, HOME: process.env.HOME!, TERM: "xterm-256color", XDG_CONFIG_HOME: tempConfigHome(), ...env } as Record<
      string,
      string
    >,
  });
  let output = "";
  let next = 0;
  term.onData((data) => {
    output += data;
    const answer = answers[next];
    if (answer && answer.prompt.test(output)) {
      next++;
      term.write(`${answer.reply}\r`);
    }
  });
  const timer = setTimeout(() => term.kill("SIGKILL"), 60_000);
  return new Promise((resolve) =>
    term.onExit(({ exitCode }) => {
      clearTimeout(timer);
      // The last output can arrive just after the exit.
      setTimeout(() => resolve({ code: exitCode, output }), 50);
    }),
  );
}

const plain = (text: string) => text.replace(/\x1b\[[0-9;?]*[A-Za-z]/g, "");

beforeAll(async () => {
  // Its local runner runs SimpleTuner too (the stand-in of test/helpers/simpletuner.ts).
  t = await startStackWithLocalRunner(runnerDir, { simpletuner: fakeSimpleTuner() });
  admin = await setUpAdmin(t);
  rita = await createUserWithKey(t, { key: admin.key }, "researcher", "rita");
  expect(
    (await t.call("POST", "/api/configs/environments", { json: { name: "demo", from_example: "demo" }, auth: { key: admin.key } })).status,
  ).toBe(201);
}, 60_000);
afterAll(async () => {
  await t?.stop();
  rmSync(runnerDir, { recursive: true, force: true });
});

describe("jobs on a terminal", () => {
  it("colours the table header and fits the table to the terminal's width; NO_COLOR turns colour off", async () => {
    const meta = "a-very-long-run-name-that-would-never-fit-a-narrow-terminal";
    const submitted = await t.call("POST", "/api/queue/submit", {
      json: { config_name: "demo", metadata: { run_name: meta } },
      auth: { key: rita.key },
    });
    expect(submitted.status).toBe(200);
    const env = { SERVICE_URL: t.base, SERVICE_API_KEY: rita.key };
    const args = ["list", "--completed", "-o", "job_id,status,metadata.run_name"];

    const wide = await onTerminal(args, env);
    expect(wide.code).toBe(0);
    expect(wide.output).toContain(`${ESC}1mJOB_ID`);
    expect(plain(wide.output)).toContain(meta);

    const narrow = await onTerminal(args, env, [], 60);
    const lines = plain(narrow.output).split(/\r?\n/).filter(Boolean);
    expect(lines.length).toBe(2);
    for (const line of lines) expect(line.length).toBeLessThanOrEqual(60);
    expect(lines[1]).toContain(submitted.body.job_id);
    expect(lines[1]).toMatch(/…$/);

    const noColor = await onTerminal(args, { ...env, NO_COLOR: "1" });
    expect(noColor.code).toBe(0);
    expect(noColor.output).not.toContain(ESC);
    expect(noColor.output).toContain("JOB_ID");
    await t.call("POST", "/api/training/cancel", { json: { job_id: submitted.body.job_id }, auth: { key: rita.key } });
    // Local jobs wait after a running one is cancelled, until a queue pass is asked for.
    await t.call("POST", "/api/queue/process", { auth: { key: admin.key } });
  });

  it("logs in by asking for the URL, username and password, never echoing the password", async () => {
    const home = tempConfigHome();
    const screen = await onTerminal(["login"], { XDG_CONFIG_HOME: home }, [
      { prompt: /Service URL/, reply: t.base },
      { prompt: /Username/, reply: "rita" },
      { prompt: /Password/, reply: "rita-password" },
    ]);
    expect(screen.code, screen.output).toBe(0);
    expect(screen.output).not.toContain("rita-password");
    expect(plain(screen.output)).toMatch(/Logged in to .* as rita; API key st_[\w-]+… saved to /);
    const file = join(home, "training-service", "config.json");
    expect(existsSync(file)).toBe(true);
    const stored = JSON.parse(readFileSync(file, "utf8"));
    expect(stored).toMatchObject({ url: t.base, username: "rita" });
    expect(JSON.stringify(stored)).not.toContain("rita-password");
    // The stored key is a working key of rita's.
    const me = await t.call("GET", "/api/users/me", { auth: { key: stored.api_key } });
    expect(me.body.username).toBe("rita");
  });

  it("draws a progress bar for a followed job's steps, and prints the other events as lines", async () => {
    const submitted = await t.call("POST", "/api/queue/submit", { json: { config_name: "demo" }, auth: { key: rita.key } });
    const jobId = submitted.body.job_id as string;
    const screen = await onTerminal(["logs", jobId, "--follow"], { SERVICE_URL: t.base, SERVICE_API_KEY: rita.key });
    expect(screen.code, screen.output).toBe(0);
    const text = plain(screen.output);
    expect(text).toMatch(/step 50\/50 \| loss \d/);
    expect(text).toContain("█");
    // Progress events draw the bar; they do not also print a line each.
    expect(text).not.toMatch(/training\.progress step \d+\/50/);
    expect(text).toMatch(/checkpoint\.saved/);
    expect(text).toContain(`job ${jobId} ended: completed`);
  });

  it("draws the same bar for a SimpleTuner run, from SimpleTuner's own progress events", async () => {
    const name = "st-follow";
    expect((await t.call("POST", "/api/configs/environments", { json: { name }, auth: { key: rita.key } })).status).toBe(201);
    const form = new FormData();
    form.set("target_path", name);
    form.append("files[]", new Blob(["a cat"]), "cat.txt");
    expect((await fetch(`${t.base}/api/datasets/upload`, { method: "POST", headers: { "x-api-key": rita.key }, body: form })).status).toBe(
      201,
    );
    const config = { "--num_processes": 0, "--max_train_steps": 20, "--standin_step_seconds": 0.1, "--checkpoint_step_interval": 10 };
    expect((await t.call("PUT", `/api/configs/${name}`, { json: { config }, auth: { key: rita.key } })).status).toBe(200);
    const submitted = await t.call("POST", "/api/queue/submit", { json: { config_name: name }, auth: { key: rita.key } });
    const jobId = submitted.body.job_id as string;
    const screen = await onTerminal(["logs", jobId, "--follow"], { SERVICE_URL: t.base, SERVICE_API_KEY: rita.key });
    expect(screen.code, screen.output).toBe(0);
    const text = plain(screen.output);
    expect(text).toMatch(/step 20\/20 \| loss 0\.\d{4}/);
    expect(text).toMatch(/checkpoint\.saved Checkpoint saved at step 10/);
    expect(text).not.toMatch(/training\.progress step/);
    expect(text).not.toContain("log.message");
    expect(text).toContain(`job ${jobId} ended: completed`);
  });
});

afterAll(() => removeFakeSimpleTuners());
