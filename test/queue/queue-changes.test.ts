// The queue's live change stream over real HTTP (issue 16): GET /api/queue/changes sends `ready`,
// then one `change` per transition naming the jobs with their statuses before and after (a
// submission, a cancel, an approval), and nothing else of them. Anonymous callers get 401; the
// stream counts toward a user's 10 live streams with the job event streams, and the 11th is
// refused (429) while the others keep going.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sseEvents, type SseEvent } from "../helpers/sse";
import { createUserWithKey, setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";
import { until } from "../helpers/wait";

let t: TestStack;
let admin: { key: string; cookie: string };
let researcher: { key: string };
let viewer: { key: string };
const opened: Stream[] = [];

interface Stream {
  status: number;
  body: any;
  events: SseEvent[];
  close(): void;
}

/** Opens `path` as `key` and collects its server-sent events in the background. */
async function open(key: string | null, path = "/api/queue/changes"): Promise<Stream> {
  const abort = new AbortController();
  const response = await fetch(`${t.base}${path}`, { headers: key ? { "x-api-key": key } : {}, signal: abort.signal });
  const stream: Stream = { status: response.status, body: null, events: [], close: () => abort.abort() };
  if (response.status !== 200) {
    stream.body = await response.json();
    return stream;
  }
  opened.push(stream);
  void (async () => {
    for await (const e of sseEvents(response.body!)) stream.events.push(e);
  })().catch(() => {});
  return stream;
}

/** The first change event naming `jobId` that `s` received, waited for. */
const changeOf = (s: Stream, jobId: string, to: string) =>
  until(`a change of ${jobId} to ${to}`, () =>
    s.events.find((e) => e.event === "change" && e.data.jobs.some((j: any) => j.job_id === jobId && j.to === to)),
  );

const submit = async (key: string, config_name = "one-gpu") => {
  const reply = await t.call("POST", "/api/queue/submit", { json: { config_name, target: "local" }, auth: { key } });
  expect(reply.status, reply.text).toBeLessThan(300);
  return reply.body.job_id as string;
};

beforeAll(async () => {
  t = await startTestStack();
  admin = await setUpAdmin(t);
  researcher = await createUserWithKey(t, { cookie: admin.cookie }, "researcher", "rhea");
  viewer = await createUserWithKey(t, { cookie: admin.cookie }, "viewer", "vic");
  expect((await t.call("POST", "/api/configs/environments", { json: { name: "one-gpu" }, auth: { key: admin.key } })).status).toBe(201);
  const put = await t.call("PUT", "/api/configs/one-gpu", { json: { config: { "--num_processes": 1 } }, auth: { key: admin.key } });
  expect(put.status, put.text).toBe(200);
}, 120_000);
afterAll(async () => {
  for (const s of opened) s.close();
  await t?.stop();
});

describe("GET /api/queue/changes", () => {
  it("refuses an anonymous caller", async () => {
    const anonymous = await open(null);
    expect(anonymous.status).toBe(401);
  });

  it("sends ready, then a change naming the job when it is submitted and when it is cancelled, and only ids and statuses", async () => {
    const s = await open(viewer.key);
    expect(s.status).toBe(200);
    await until("ready", () => s.events.find((e) => e.event === "ready"));
    expect(s.events[0]).toMatchObject({ event: "ready", data: { at: expect.any(String) } });

    const jobId = await submit(researcher.key);
    const submitted = await until("the submission's change", () =>
      s.events.find((e) => e.event === "change" && e.data.jobs.some((j: any) => j.job_id === jobId && j.from === null)),
    );
    expect(submitted.data.at).toEqual(expect.any(String));
    expect(Object.keys(submitted.data).sort()).toEqual(["at", "jobs"]);
    for (const j of submitted.data.jobs) expect(Object.keys(j).sort()).toEqual(["from", "job_id", "to"]);
    expect(["pending", "running"]).toContain(submitted.data.jobs.find((j: any) => j.job_id === jobId).to);

    expect((await t.call("POST", `/api/queue/${jobId}/cancel`, { auth: { key: researcher.key } })).status).toBe(200);
    const cancelled = await changeOf(s, jobId, "cancelled");
    expect(cancelled.data.jobs.find((j: any) => j.job_id === jobId).from).not.toBe("cancelled");
    s.close();
  }, 60_000);

  it("sends a change from blocked to pending when an admin approves", async () => {
    const s = await open(viewer.key);
    await until("ready", () => s.events.find((e) => e.event === "ready"));
    expect((await t.call("PUT", "/api/queue/approval-rules", { json: { local_gpu_threshold: 0 }, auth: { key: admin.key } })).status).toBe(
      200,
    );
    const jobId = await submit(researcher.key);
    await changeOf(s, jobId, "blocked");
    expect((await t.call("POST", `/api/queue/${jobId}/approve`, { auth: { key: admin.key } })).status).toBe(200);
    const approved = await changeOf(s, jobId, "pending");
    expect(approved.data.jobs.find((j: any) => j.job_id === jobId && j.to === "pending").from).toBe("blocked");
    await t.call("PUT", "/api/queue/approval-rules", { json: { local_gpu_threshold: null }, auth: { key: admin.key } });
    await t.call("POST", `/api/queue/${jobId}/cancel`, { auth: { key: admin.key } });
    s.close();
  }, 60_000);

  it("is one of a user's 10 live streams: the 11th is refused with 429 naming the limit, and the others keep going", async () => {
    const lead = await createUserWithKey(t, { cookie: admin.cookie }, "lead", "lena");
    // A job that stays waiting (no GPU box here), so its event streams stay open.
    const waiting = await submit(researcher.key);
    const streams: Stream[] = [];
    for (let i = 0; i < 5; i++) streams.push(await open(lead.key));
    for (let i = 0; i < 5; i++) streams.push(await open(lead.key, `/api/training/events/stream?job_id=${waiting}`));
    expect(streams.map((s) => s.status)).toEqual(Array(10).fill(200));

    const refused = await open(lead.key);
    expect(refused.status).toBe(429);
    expect(refused.body).toMatchObject({ code: "too_many_watchers", detail: expect.stringContaining("10 live event streams") });
    const refusedEvents = await open(lead.key, `/api/training/events/stream?job_id=${waiting}`);
    expect(refusedEvents.status).toBe(429);

    // Another user is not held back, and the open queue streams still hear of changes.
    const other = await open(viewer.key);
    expect(other.status).toBe(200);
    expect((await t.call("POST", `/api/queue/${waiting}/cancel`, { auth: { key: researcher.key } })).status).toBe(200);
    for (const s of [...streams.slice(0, 5), other]) await changeOf(s, waiting, "cancelled");
    for (const s of [...streams, other]) s.close();
  }, 60_000);
});
