// Issue 26 over real HTTP: a trainer's output is text wherever other people read it. Its events
// (type and text) reach `jobs logs` with colour codes removed and every other control escaped,
// `--format json` stays exact JSON, its error message is stored without escape codes, the
// dashboard's log shows the same text, and another user's metadata in `jobs list` is escaped too.
// A WebSocket opened from another site's page is refused (403 foreign_origin), one from the
// service's own page or from a program without Origin is not.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { applyEvents, EMPTY_TRAINING } from "../../edge/ui/views/job-events";
import { jobs } from "../helpers/cli";
import { createUserWithKey, setUpAdmin, startTestStack, type Credentials, type TestStack } from "../helpers/stack";

let t: TestStack;
let admin: { key: string; cookie: string };
let alice: { key: string; cookie: string };
let lena: { key: string };
let box: Credentials;
let jobId: string;

/** Any control a terminal acts on: C0 but tab and line feed, DEL, C1. */
const RAW_CONTROL = /[\x00-\x08\x0b-\x1f\x7f-\x9f]/;

const TITLE = "\x1b]0;owned\x07";
const CLEAR = "\x1b[2J";
const CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4=\x07"; // OSC 52: "rm -rf ~" into the reader's clipboard
const C1_CSI = "\x9b2J";

const EVENTS = [
  // What SimpleTuner prints: a coloured log line.
  { type: "log", message: "\x1b[32m[INFO] loading model\x1b[0m" },
  { type: `log${TITLE}`, message: `title ${TITLE} clear ${CLEAR} clip ${CLIPBOARD} c1 ${C1_CSI} bell \x07 done` },
  { type: "checkpoint.saved", title: `saved${CLEAR}`, data: { step: 2, path: "output/\x9d0;owned\x9cckpt" } },
];
const SHOWN = [
  ["log", "[INFO] loading model"],
  [
    "log\\u001b]0;owned\\u0007",
    "title \\u001b]0;owned\\u0007 clear \\u001b[2J clip \\u001b]52;c;cm0gLXJmIH4=\\u0007 c1 \\u009b2J bell \\u0007 done",
  ],
  ["checkpoint.saved", "saved\\u001b[2J (output/\\u009d0;owned\\u009cckpt)"],
];

const asUser = (who: { key: string }) => ({ SERVICE_URL: t.base, SERVICE_API_KEY: who.key });
/** A printed event line without its clock (which is in this machine's time zone). */
const withoutClock = (line: string) => line.replace(/^\d\d:\d\d:\d\d /, "");

beforeAll(async () => {
  t = await startTestStack();
  admin = await setUpAdmin(t);
  alice = await createUserWithKey(t, { key: admin.key }, "researcher", "alice");
  lena = await createUserWithKey(t, { key: admin.key }, "lead", "lena");
  const worker = await t.call("POST", "/api/admin/workers", { json: { name: "box" }, auth: { key: admin.key } });
  box = { bearer: worker.body.token };
  expect((await t.call("POST", "/api/workers/register", { json: { role: "local", gpus: [] }, auth: box })).status).toBe(200);
  expect((await t.call("POST", "/api/configs/environments", { json: { name: "cpu" }, auth: { key: alice.key } })).status).toBe(201);
  expect((await t.call("PUT", "/api/configs/cpu", { json: { config: { "--num_processes": 0 } }, auth: { key: alice.key } })).status).toBe(
    200,
  );
  const submitted = await t.call("POST", "/api/queue/submit", { json: { config_name: "cpu", target: "local" }, auth: { key: alice.key } });
  expect(submitted.body).toMatchObject({ status: "running" });
  jobId = submitted.body.job_id;
  const events = EVENTS.map((event, seq) => ({ seq, event }));
  expect((await t.call("POST", `/api/workers/jobs/${jobId}/events`, { json: { attempt: 1, events }, auth: box })).status).toBe(200);
  const finish = {
    status: "failed",
    exit_code: 1,
    error: `\x1b[31mOSError\x1b[0m: [Errno 30] Read-only file system${TITLE}`,
    last_lines: [
      "\x1b[32m[INFO] loading model\x1b[0m",
      `${CLEAR}${CLIPBOARD}Traceback (most recent call last):\r`,
      `\x9b31mOSError\x1b[0m`,
    ],
  };
  expect((await t.call("POST", `/api/workers/jobs/${jobId}/finish`, { json: finish, auth: box })).status).toBe(200);
}, 60_000);
afterAll(async () => {
  await t?.stop();
});

describe("a trainer's events in `jobs logs`", () => {
  it("are printed with colour codes removed and every other control escaped, in the type and the text, for a lead as for the owner", async () => {
    for (const reader of [lena, alice]) {
      const run = await jobs(["logs", jobId], { env: asUser(reader) });
      expect(run.code, run.stderr).toBe(0);
      expect(run.stdout).not.toMatch(RAW_CONTROL);
      const lines = run.stdout.trimEnd().split("\n").map(withoutClock);
      expect(lines.slice(0, 3)).toEqual(SHOWN.map(([type, text]) => `${type} ${text}`));
    }
  });

  it("with --format json, are the API's events exactly, as JSON lines with no raw control", async () => {
    const api = (await t.call("GET", `/api/training/events?job_id=${jobId}`, { auth: { key: lena.key } })).body.events;
    expect(api.slice(0, 3).map((e: any) => e.type)).toEqual(EVENTS.map((e) => e.type));
    const run = await jobs(["logs", jobId, "--format", "json"], { env: asUser(lena) });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).not.toMatch(RAW_CONTROL);
    expect(run.jsonLines()).toEqual(api);
  });

  it("with --follow, are printed the same way until the job's end", async () => {
    const run = await jobs(["logs", jobId, "--follow"], { env: asUser(lena) });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout + run.stderr).not.toMatch(RAW_CONTROL);
    expect(run.stdout.trimEnd().split("\n").slice(0, 3).map(withoutClock)).toEqual(SHOWN.map(([type, text]) => `${type} ${text}`));
    expect(run.stderr).toBe(`job ${jobId} ended: failed\n`);
    const json = await jobs(["logs", jobId, "--follow", "--format", "json"], { env: asUser(lena) });
    expect(json.stdout).not.toMatch(RAW_CONTROL);
    expect(
      json
        .jsonLines()
        .slice(0, 3)
        .map((e) => [e.type, e.message ?? e.title]),
    ).toEqual(EVENTS.map((e) => [e.type, "message" in e ? e.message : e.title]));
  });
});

describe("another user's text in `jobs list`", () => {
  it("shows its control characters as escapes in the table, and as JSON escapes with --format json", async () => {
    const runName = `run${TITLE}${C1_CSI}`;
    const submitted = await t.call("POST", "/api/queue/submit", {
      json: { config_name: "cpu", target: "local", metadata: { run_name: runName } },
      auth: { key: alice.key },
    });
    expect(submitted.status, submitted.text).toBe(200);
    const table = await jobs(["list", "--user", "alice", "-o", "job_id,metadata.run_name"], { env: asUser(lena) });
    expect(table.code, table.stderr).toBe(0);
    expect(table.stdout).not.toMatch(RAW_CONTROL);
    expect(table.stdout).toContain(`${submitted.body.job_id}  run\\u001b]0;owned\\u0007\\u009b2J`);
    const json = await jobs(["list", "--user", "alice", "-o", "job_id,metadata.run_name", "--format", "json"], { env: asUser(lena) });
    expect(json.stdout).not.toMatch(RAW_CONTROL);
    expect(json.json()).toContainEqual({ job_id: submitted.body.job_id, "metadata.run_name": runName });
  });
});

describe("a trainer's error message", () => {
  it("is stored as plain text: no colour codes, no title, screen or clipboard sequences", async () => {
    const job = (await t.call("GET", `/api/queue/jobs/${jobId}`, { auth: { key: lena.key } })).body;
    expect(job.error_message).toBe(
      "OSError: [Errno 30] Read-only file system\nlast lines:\n[INFO] loading model\nTraceback (most recent call last):\nOSError",
    );
    const run = await jobs(["status", jobId], { env: asUser(lena) });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).not.toMatch(RAW_CONTROL);
    expect(run.stdout).toContain("Error     OSError: [Errno 30] Read-only file system\nlast lines:\n[INFO] loading model\n");
  });
});

describe("the dashboard's log", () => {
  it("shows the events as `jobs logs` does: colour codes removed, other controls as visible escapes", async () => {
    const { events } = (await t.call("GET", `/api/training/events?job_id=${jobId}`, { auth: { cookie: alice.cookie } })).body;
    const state = applyEvents(EMPTY_TRAINING, events);
    expect(state.log.slice(0, 3).map((line) => [line.type, line.text])).toEqual(SHOWN);
  });
});

describe("WebSocket upgrades", () => {
  const streamUrl = () => `${t.base.replace("http", "ws")}/api/training/events/stream?job_id=${jobId}`;

  /** Opens a WebSocket; resolves with the messages up to the end, or with the status it was refused with and its body. */
  function open(url: string, headers: Record<string, string>): Promise<{ status: number; messages: any[]; body: any }> {
    return new Promise((done, fail) => {
      const messages: any[] = [];
      const socket = new WebSocket(url, { headers });
      socket.on("unexpected-response", (_request, response) => {
        let text = "";
        response.on("data", (chunk: Buffer) => (text += chunk));
        response.on("end", () => done({ status: response.statusCode!, messages, body: JSON.parse(text) }));
      });
      socket.on("message", (data) => {
        const message = JSON.parse(String(data));
        messages.push(message);
        if (message.type === "end") socket.close();
      });
      socket.on("close", () => done({ status: 101, messages, body: null }));
      socket.on("error", (error) => (error.message.startsWith("Unexpected server response") ? undefined : fail(error)));
    });
  }

  it("from the service's own page or from a program without Origin stream the job's events", async () => {
    const ways: Record<string, string>[] = [{ "x-api-key": alice.key }, { cookie: alice.cookie, origin: t.base }];
    for (const headers of ways) {
      const answer = await open(streamUrl(), headers);
      expect(answer.status).toBe(101);
      expect(answer.messages.at(-1)).toEqual({ type: "end", status: "failed" });
      expect(answer.messages.slice(0, 3).map((m) => m.type)).toEqual(EVENTS.map((e) => e.type));
    }
  });

  it("from another site's page are refused with 403 foreign_origin, with a cookie or a key, and nothing is streamed", async () => {
    const ways: Record<string, string>[] = [
      { cookie: alice.cookie, origin: "https://evil.example" },
      { "x-api-key": alice.key, origin: "https://evil.example" },
      { cookie: alice.cookie, origin: "null" },
      // The same host on another port is another site.
      { cookie: alice.cookie, origin: `http://127.0.0.1:${Number(new URL(t.base).port) + 1}` },
    ];
    for (const headers of ways) {
      const answer = await open(streamUrl(), headers);
      expect(answer).toEqual({
        status: 403,
        messages: [],
        body: {
          code: "foreign_origin",
          detail: `A WebSocket may only be opened from this service's own pages, not from ${JSON.stringify(headers.origin)}`,
        },
      });
    }
  });

  it("to a runner's channel: refused from another site's page, open to the runner itself", async () => {
    const url = `${t.base.replace("http", "ws")}/api/workers/channel`;
    const refused = await open(url, { authorization: `Bearer ${box.bearer}`, origin: "https://evil.example" });
    expect(refused.status).toBe(403);
    expect(refused.body.code).toBe("foreign_origin");
    const socket = new WebSocket(url, { headers: { authorization: `Bearer ${box.bearer}` } });
    await new Promise((opened, fail) => (socket.once("open", opened), socket.once("error", fail)));
    socket.close();
  });
});
