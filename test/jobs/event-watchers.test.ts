// Live event watchers are bounded over real HTTP (issue 12): at most 10 streams per user over
// all jobs and 20 per job (429 too_many_watchers, and the streams already open keep going); a
// closed stream frees its place once the hub notices its reader gone (two keep-alives: 30 s in
// production, 2 s under the test stack's LIVE_KEEPALIVE_SECONDS). The writer behind server-sent events gives up a reader that
// falls too far behind instead of buffering for it.
import { get } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { boundedWriter } from "../../edge/jobs/bounded-writer";
import { createUserWithKey, setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";
import { until } from "../helpers/wait";

let t: TestStack;
let admin: { key: string; cookie: string };
let job: string;
const open: (() => void)[] = [];

/** Opens an event stream as `key`; resolves with its status once the headers are in. `stop` closes its connection. */
function watch(key: string, jobId = job): Promise<{ status: number; body: any; stop: () => void }> {
  return stream(`${t.base}/api/training/events/stream?job_id=${jobId}`, key);
}

/** Opens the live stream at `url` as `key`, as `watch` does. */
function stream(url: string, key: string): Promise<{ status: number; body: any; stop: () => void }> {
  return new Promise((resolve, reject) => {
    const request = get(url, { headers: { "x-api-key": key }, agent: false }, (response) => {
      if (response.statusCode === 200) {
        open.push(() => request.destroy());
        response.on("error", () => {});
        return resolve({ status: 200, body: null, stop: () => request.destroy() });
      }
      let text = "";
      response.on("data", (chunk) => (text += chunk));
      response.on("end", () => resolve({ status: response.statusCode!, body: JSON.parse(text), stop: () => {} }));
    });
    request.on("error", (error) => (request.destroyed ? undefined : reject(error)));
  });
}

beforeAll(async () => {
  t = await startTestStack();
  admin = await setUpAdmin(t);
  expect((await t.call("POST", "/api/configs/environments", { json: { name: "gpu" }, auth: { key: admin.key } })).status).toBe(201);
  job = (await t.call("POST", "/api/queue/submit", { json: { config_name: "gpu", target: "local" }, auth: { key: admin.key } })).body
    .job_id;
});
afterAll(async () => {
  for (const close of open) close();
  await t?.stop();
});

describe("live watchers", () => {
  it("are at most 10 per user (429 naming the limit), and a closed stream frees its place", async () => {
    const viewer = await createUserWithKey(t, { cookie: admin.cookie }, "lead", "vera");
    const streams = [];
    for (let i = 0; i < 10; i++) streams.push(await watch(viewer.key));
    expect(streams.map((s) => s.status)).toEqual(Array(10).fill(200));
    const refused = await watch(viewer.key);
    expect(refused).toMatchObject({
      status: 429,
      body: {
        code: "too_many_watchers",
        detail: "You already have 10 live event streams, the most one user has: close one, or poll GET /api/training/events",
      },
    });
    // Another user is not held back by this one's streams.
    const other = await watch(admin.key);
    expect(other.status).toBe(200);
    streams[0]!.stop();
    await until("the closed stream's place to be freed", async () => {
      const again = await watch(viewer.key);
      if (again.status === 200) streams.push(again);
      return again.status === 200;
    });
    for (const s of [...streams, other]) s.stop();
  }, 60_000);

  it("are at most 20 per job", async () => {
    const users = await Promise.all([0, 1, 2].map((i) => createUserWithKey(t, { cookie: admin.cookie }, "lead", `watcher${i}`)));
    // A job of its own: the streams of the test before take up to two keep-alives to be noticed gone.
    const busy = (await t.call("POST", "/api/queue/submit", { json: { config_name: "gpu", target: "local" }, auth: { key: admin.key } }))
      .body.job_id;
    const streams = [];
    for (const user of users.slice(0, 2)) for (let i = 0; i < 10; i++) streams.push(await watch(user.key, busy));
    expect(streams.map((s) => s.status)).toEqual(Array(20).fill(200));
    const refused = await watch(users[2]!.key, busy);
    expect(refused).toMatchObject({
      status: 429,
      body: {
        code: "too_many_watchers",
        detail: `Job ${busy} already has 20 live watchers, the most one job has: close one, or poll GET /api/training/events`,
      },
    });
    // The same user may still watch another job.
    const elsewhere = await watch(users[2]!.key);
    expect(elsewhere.status).toBe(200);
    for (const s of [...streams, elsewhere]) s.stop();
  });
});

describe("LIVE_STREAMS_PER_USER", () => {
  it("sets how many live streams one user holds, job events and the queue's changes together", async () => {
    const small = await startTestStack(undefined, { LIVE_STREAMS_PER_USER: "3" });
    try {
      const owner = await setUpAdmin(small);
      expect((await small.call("POST", "/api/configs/environments", { json: { name: "gpu" }, auth: { key: owner.key } })).status).toBe(201);
      const submitted = await small.call("POST", "/api/queue/submit", {
        json: { config_name: "gpu", target: "local" },
        auth: { key: owner.key },
      });
      const events = `${small.base}/api/training/events/stream?job_id=${submitted.body.job_id}`;
      const streams = [
        await stream(events, owner.key),
        await stream(events, owner.key),
        await stream(`${small.base}/api/queue/changes`, owner.key),
      ];
      expect(streams.map((s) => s.status)).toEqual([200, 200, 200]);
      const detail = "You already have 3 live event streams, the most one user has: close one, or";
      expect(await stream(events, owner.key)).toMatchObject({
        status: 429,
        body: { code: "too_many_watchers", detail: `${detail} poll GET /api/training/events` },
      });
      expect(await stream(`${small.base}/api/queue/changes`, owner.key)).toMatchObject({
        status: 429,
        body: { code: "too_many_watchers", detail: `${detail} reload GET /api/queue` },
      });
      for (const s of streams) s.stop();
    } finally {
      await small.stop();
    }
  }, 60_000);
});

describe("the bounded writer (streams only)", () => {
  it("gives up a reader that falls past the cap, and waits for one that catches up", async () => {
    const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
    let overflowed = 0;
    const out = boundedWriter(writable, 1000, () => overflowed++);
    expect(out.write(new Uint8Array(400))).toBe(true);
    expect(out.write(new Uint8Array(400))).toBe(true);
    let drained = false;
    const waiting = out.drained().then(() => (drained = true));
    await new Promise((r) => setTimeout(r, 10));
    expect(drained).toBe(false);
    const reader = readable.getReader();
    await reader.read();
    await reader.read();
    await waiting;
    expect(drained).toBe(true);
    // Nobody reads now: the unread bytes pass the cap, and the reader is given up once.
    expect(out.write(new Uint8Array(600))).toBe(true);
    expect(out.write(new Uint8Array(600))).toBe(false);
    expect(out.write(new Uint8Array(1))).toBe(false);
    expect(overflowed).toBe(1);
  });
});
