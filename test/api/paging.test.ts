// Paging of the long listings over real HTTP: GET /api/queue walks thousands of jobs exactly once
// while more are submitted; the audit trail, a job's events and its webhook deliveries page to
// exactly what one unpaged read lists; and a cursor that is garbage, edited, another listing's or
// sent with conflicting filters is a 422 `invalid_cursor`, never a 500.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PUBLIC_QUEUE_FIELDS } from "../../shared/schemas/queue";
import { createUserWithKey, setUpAdmin, startTestStack, type Credentials, type TestStack } from "../helpers/stack";

let t: TestStack;
let admin: Credentials;
let lead: Credentials;
let alice: Credentials & { id: number };
let bob: Credentials & { id: number };

const JOBS = 2_500;
// Waits for a worker labelled pool=nowhere, which never comes: every job stays pending.
const STUCK = { config_name: "cpu", target: "worker", worker_labels: { pool: "nowhere" } };

const get = (path: string, auth: Credentials = admin) => t.call("GET", path, { auth });
const submit = async (who: Credentials) => {
  const reply = await t.call("POST", "/api/queue/submit", { json: STUCK, auth: who });
  if (reply.status !== 200 || reply.body.status !== "queued") throw new Error(`submit: ${reply.status} ${reply.text}`);
  return reply.body.job_id as string;
};
/** `count` submissions, `parallel` at a time, alternating between `who`. */
async function submitMany(count: number, who: Credentials[], parallel = 16): Promise<string[]> {
  const ids: string[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: parallel }, async () => {
      while (next < count) {
        const i = next++;
        ids.push(await submit(who[i % who.length]!));
      }
    }),
  );
  return ids;
}
const cursorOf = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");

/** Every page of a listing from `first`, following next_cursor; `between` runs after each page. */
async function walk(first: string, auth: Credentials, pick: (body: any) => any[], between: () => Promise<unknown> = async () => {}) {
  const pages: any[] = [];
  let reply = await get(first, auth);
  for (;;) {
    expect(reply.status, reply.text).toBe(200);
    pages.push(reply.body);
    if (reply.body.next_cursor === null) break;
    await between();
    const path = first.split("?")[0]!;
    reply = await get(`${path}?cursor=${reply.body.next_cursor}&limit=${new URL(first, t.base).searchParams.get("limit")}`, auth);
  }
  return { pages, items: pages.flatMap(pick) };
}

beforeAll(async () => {
  t = await startTestStack();
  const first = await setUpAdmin(t);
  admin = { key: first.key };
  lead = { key: (await createUserWithKey(t, { cookie: first.cookie }, "lead", "lena")).key };
  const a = await createUserWithKey(t, { cookie: first.cookie }, "researcher", "alice");
  const b = await createUserWithKey(t, { cookie: first.cookie }, "researcher", "bob");
  alice = { key: a.key, id: a.id };
  bob = { key: b.key, id: b.id };
  expect((await t.call("POST", "/api/configs/environments", { json: { name: "cpu" }, auth: admin })).status).toBe(201);
  expect((await t.call("PUT", "/api/configs/cpu", { json: { config: { "--num_processes": 0 } }, auth: admin })).status).toBe(200);
});
afterAll(async () => {
  await t?.stop();
});

describe("GET /api/queue", () => {
  let before: string[];
  beforeAll(async () => {
    before = await submitMany(JOBS, [alice, bob]);
  }, 300_000);

  it("walks 2,500 jobs exactly once in submission order while more are submitted, showing others' jobs with public fields only", async () => {
    const during: string[] = [];
    // Between pages new jobs arrive, from both users; a racing submitter adds more at the same time.
    let racing = true;
    const racer = (async () => {
      while (racing) during.push(await submit(bob));
    })();
    const { pages, items } = await walk(
      "/api/queue?order=submitted&limit=100",
      alice,
      (b) => b.jobs,
      async () => during.push(...(await submitMany(5, [alice, bob], 5))),
    );
    racing = false;
    await racer;
    const ids = items.map((j) => j.job_id as string);
    expect(new Set(ids).size).toBe(ids.length);
    const seen = new Set(ids);
    expect(before.filter((id) => !seen.has(id))).toEqual([]);
    expect(during.length).toBeGreaterThan(100);
    expect(pages.length).toBeGreaterThan(25);
    // Submission order: ids only grow, across pages too.
    const numeric = items.map((j) => j.id as number);
    expect(numeric).toEqual([...numeric].sort((x, y) => x - y));
    // total counts the matching entries when the page was read: never fewer than the first page's.
    expect(pages[0].total).toBeGreaterThanOrEqual(JOBS);
    expect(pages.at(-1).total).toBeGreaterThanOrEqual(pages[0].total);
    const bobs = items.filter((j) => j.user_id === bob.id);
    expect(bobs.length).toBeGreaterThan(JOBS / 2 - 1);
    for (const job of bobs.slice(0, 50)) expect(Object.keys(job).sort()).toEqual([...PUBLIC_QUEUE_FIELDS].sort());
    expect(items.find((j) => j.user_id === alice.id).config_name).toBe("cpu");
  }, 300_000);

  it("walks the scheduling order exactly once too while higher-priority jobs arrive, pending jobs of a page by live position", async () => {
    const during: string[] = [];
    const { pages, items } = await walk(
      "/api/queue?limit=100",
      lead,
      (b) => b.jobs,
      async () => during.push(...(await submitMany(5, [admin, lead, alice], 5))),
    );
    const ids = items.map((j) => j.job_id as string);
    expect(new Set(ids).size).toBe(ids.length);
    const seen = new Set(ids);
    expect(before.filter((id) => !seen.has(id))).toEqual([]);
    // The first page without a cursor is today's "show me the queue": the most urgent first.
    const firstPending = pages[0].jobs.filter((j: any) => j.status === "pending");
    const positions = firstPending.map((j: any) => j.position).filter((p: number | null) => p !== null);
    expect(positions).toEqual([...positions].sort((x: number, y: number) => x - y));
    expect(during.length).toBeGreaterThan(0);
  }, 300_000);

  it("keeps the first page's filters and order in the cursor, and refuses a request that changes them", async () => {
    const first = await get("/api/queue?status=pending&order=submitted&limit=3");
    expect(first.body.jobs.map((j: any) => j.status)).toEqual(["pending", "pending", "pending"]);
    const second = await get(`/api/queue?cursor=${first.body.next_cursor}`);
    expect(second.status).toBe(200);
    expect(second.body.total).toBe(first.body.total);
    // The default limit (50) applies when none is sent; the order is still by id, after the first page.
    expect(second.body.jobs).toHaveLength(50);
    expect(second.body.jobs[0].id).toBeGreaterThan(first.body.jobs[2].id);
    expect((await get(`/api/queue?cursor=${first.body.next_cursor}&status=pending&order=submitted&limit=3`)).body.jobs[0]).toEqual(
      second.body.jobs[0],
    );
    for (const change of ["status=running", "order=scheduling", "include_completed=true"]) {
      const refused = await get(`/api/queue?cursor=${first.body.next_cursor}&${change}`);
      expect(refused.status, change).toBe(422);
      expect(refused.body.code).toBe("invalid_cursor");
      expect(refused.body.detail).toContain(`but this request asks for ${change}`);
    }
  });

  it("says null next_cursor on the last page, with total still the whole count", async () => {
    const cursors: (string | null)[] = [null];
    let page = (await get("/api/queue?status=pending&order=submitted&limit=1000")).body;
    const total = page.total;
    while (page.next_cursor !== null) {
      cursors.push(page.next_cursor);
      page = (await get(`/api/queue?cursor=${page.next_cursor}&limit=1000`)).body;
    }
    const left = total - 1000 * (cursors.length - 1);
    expect(page.jobs).toHaveLength(left);
    expect(page.total).toBe(total);
    // Exactly `limit` entries left: the page that takes them is the last; one fewer leaves a cursor to one more.
    const from = cursors.at(-1);
    expect((await get(`/api/queue?cursor=${from}&limit=${left}`)).body.next_cursor).toBeNull();
    const short = (await get(`/api/queue?cursor=${from}&limit=${left - 1}`)).body;
    expect(short.next_cursor).toEqual(expect.any(String));
    const one = (await get(`/api/queue?cursor=${short.next_cursor}&limit=5`)).body;
    expect(one.jobs.map((j: any) => j.job_id)).toEqual([page.jobs.at(-1).job_id]);
    expect(one.next_cursor).toBeNull();
  });
});

describe("GET /api/audit", () => {
  beforeAll(async () => {
    for (let i = 0; i < 12; i++)
      await t.call("POST", "/api/cloud/auth/login", { json: { username: `nobody-${i}`, password: "wrong password" } });
  });

  it("pages back to exactly the unpaged listing, with next_cursor or next_before_id, and a filter kept in the cursor", async () => {
    // Audit entries are written just after the answer: wait for the last one.
    await expect.poll(async () => (await get("/api/audit?event_type=login_failed&limit=1000")).body.entries.length).toBe(12);
    const all = (await get("/api/audit?limit=1000")).body;
    expect(all.next_cursor).toBeNull();
    expect(all.next_before_id).toBeNull();
    const byCursor = await walk("/api/audit?limit=7", admin, (b) => b.entries);
    expect(byCursor.items.map((e) => e.id)).toEqual(all.entries.map((e: any) => e.id));
    expect(byCursor.pages.at(-1).next_before_id).toBeNull();
    const byId: any[] = [];
    let page = (await get("/api/audit?limit=7")).body;
    byId.push(...page.entries);
    while (page.next_before_id !== null) {
      page = (await get(`/api/audit?limit=7&before_id=${page.next_before_id}`)).body;
      byId.push(...page.entries);
    }
    expect(byId).toEqual(all.entries);

    const failed = (await get("/api/audit?event_type=login_failed&limit=1000")).body.entries;
    expect(failed.length).toBeGreaterThanOrEqual(12);
    const filtered = await walk("/api/audit?event_type=login_failed&limit=5", admin, (b) => b.entries);
    expect(filtered.items).toEqual(failed);
  });

  it("refuses a cursor with before_id, or with another event_type", async () => {
    const first = (await get("/api/audit?event_type=login_failed&limit=2")).body;
    const both = await get(`/api/audit?cursor=${first.next_cursor}&before_id=5`);
    expect(both.status).toBe(422);
    expect(both.body).toEqual({
      code: "invalid_cursor",
      detail: "send cursor or before_id, not both: the cursor already says where the page starts",
    });
    const other = await get(`/api/audit?cursor=${first.next_cursor}&event_type=rate_limited`);
    expect(other.status).toBe(422);
    expect(other.body.code).toBe("invalid_cursor");
  });
});

describe("a job's events and webhook deliveries", () => {
  let box: Credentials;
  let jobId: string;
  const TARGETS = 5;
  const CHECKPOINTS = 23;

  beforeAll(async () => {
    const worker = await t.call("POST", "/api/admin/workers", { json: { name: "box" }, auth: admin });
    box = { bearer: worker.body.token };
    expect((await t.call("POST", "/api/workers/register", { json: { role: "local", gpus: [] }, auth: box })).status).toBe(200);
    // Private receivers are refused at delivery (allow_private_targets is off): no network needed.
    const hooks = JSON.stringify(
      Array.from({ length: TARGETS }, (_, i) => ({ webhook_type: "raw", callback_url: `http://127.0.0.1:9/hook-${i}` })),
    );
    expect((await t.call("POST", "/api/configs/environments", { json: { name: "hooked" }, auth: alice })).status).toBe(201);
    expect(
      (await t.call("PUT", "/api/configs/hooked", { json: { config: { "--num_processes": 0, "--webhook_config": hooks } }, auth: alice }))
        .status,
    ).toBe(200);
    const submitted = await t.call("POST", "/api/queue/submit", { json: { config_name: "hooked", target: "local" }, auth: alice });
    expect(submitted.body).toMatchObject({ status: "running" });
    jobId = submitted.body.job_id;
    const events = Array.from({ length: CHECKPOINTS }, (_, i) => ({
      seq: i,
      event: { type: "checkpoint.saved", data: { step: i + 1, path: `output/checkpoint-${i + 1}` } },
    }));
    expect((await t.call("POST", `/api/workers/jobs/${jobId}/events`, { json: { attempt: 1, events }, auth: box })).status).toBe(200);
  });

  it("pages a running job's events to the unpaged log, and keeps a cursor while it runs; null once it has ended", async () => {
    const all = (await get(`/api/training/events?job_id=${jobId}&limit=1000`, alice)).body;
    expect(all.events).toHaveLength(CHECKPOINTS);
    // Running: more may come, so the cursor stays (the next page is empty now).
    const tail = await get(`/api/training/events?cursor=${all.next_cursor}`, alice);
    expect(tail.body).toMatchObject({ job_id: jobId, events: [], next_index: CHECKPOINTS });
    expect(tail.body.next_cursor).toEqual(expect.any(String));
    const finished = await t.call("POST", `/api/workers/jobs/${jobId}/finish`, { json: { status: "completed", exit_code: 0 }, auth: box });
    expect(finished.status).toBe(200);
    // A cursor keeps its job: no job_id needed (and "the job started last" could be another one).
    const paged = await walk(`/api/training/events?job_id=${jobId}&limit=4`, alice, (b) => b.events);
    expect(paged.items).toEqual(all.events);
    expect(paged.pages.map((p) => p.events.length)).toEqual([4, 4, 4, 4, 4, 3]);
    expect(paged.pages.at(-1).next_index).toBe(CHECKPOINTS);
    // since_index still works; it and the cursor agree.
    expect((await get(`/api/training/events?job_id=${jobId}&since_index=4&limit=4`, alice)).body.events).toEqual(paged.pages[1].events);
  });

  it("pages the deliveries to the unpaged list", async () => {
    let all: any;
    // A job.checkpoint per event and receiver, then job.completed; each refused in turn.
    await expect
      .poll(
        async () => {
          all = (await get(`/api/training/webhooks?job_id=${jobId}&limit=1000`, alice)).body;
          return all.deliveries.length >= (CHECKPOINTS + 1) * TARGETS && all.deliveries.every((d: any) => d.status !== "pending");
        },
        { timeout: 20_000 },
      )
      .toBe(true);
    expect(all.next_cursor).toBeNull();
    expect(new Set(all.deliveries.map((d: any) => d.status))).toEqual(new Set(["refused"]));
    expect(all.deliveries.filter((d: any) => d.type === "job.checkpoint")).toHaveLength(CHECKPOINTS * TARGETS);
    // The default page is 100 deliveries.
    const first = (await get(`/api/training/webhooks?job_id=${jobId}`, alice)).body;
    expect(first.deliveries).toEqual(all.deliveries.slice(0, 100));
    const paged = await walk(`/api/training/webhooks?job_id=${jobId}&limit=7`, alice, (b) => b.deliveries);
    expect(paged.items).toEqual(all.deliveries);
    expect(paged.pages).toHaveLength(Math.ceil(all.deliveries.length / 7));
  });

  it("checks access on the cursor's job, and refuses a cursor for another job", async () => {
    const page = (await get(`/api/training/events?job_id=${jobId}&limit=2`, alice)).body;
    const stranger = await get(`/api/training/events?cursor=${page.next_cursor}`, bob);
    expect(stranger.status).toBe(403);
    expect(stranger.body.code).toBe("not_your_job");
    const hooks = (await get(`/api/training/webhooks?job_id=${jobId}&limit=2`, alice)).body;
    expect((await get(`/api/training/webhooks?cursor=${hooks.next_cursor}`, bob)).status).toBe(403);
    const forged = await get(`/api/training/webhooks?cursor=${cursorOf({ l: "deliveries", job_id: jobId, after_id: 0 })}`, bob);
    expect(forged.status).toBe(403);
    const elsewhere = await get(`/api/training/events?cursor=${page.next_cursor}&job_id=local-someone-else`, alice);
    expect(elsewhere.status).toBe(422);
    expect(elsewhere.body.code).toBe("invalid_cursor");
    const both = await get(`/api/training/events?cursor=${page.next_cursor}&since_index=0`, alice);
    expect(both.body).toEqual({
      code: "invalid_cursor",
      detail: "send cursor or since_index, not both: the cursor already says where the page starts",
    });
    const missing = await get("/api/training/webhooks", alice);
    expect(missing.status).toBe(422);
    expect(missing.body.detail).toBe("job_id is required (or a cursor, which keeps its job)");
  });
});

describe("careless and hostile cursors and limits", () => {
  let cursors: Record<string, string>;
  beforeAll(async () => {
    cursors = {
      queue: (await get("/api/queue?limit=1")).body.next_cursor,
      audit: (await get("/api/audit?limit=1")).body.next_cursor,
    };
  });

  const LISTINGS = ["/api/queue", "/api/audit", "/api/training/events", "/api/training/webhooks"];
  const GARBAGE = [
    "garbage!",
    "%00",
    "x".repeat(5000),
    "bm90IGpzb24", // "not json"
    cursorOf(null),
    cursorOf([1, 2]),
    cursorOf("queue"),
    cursorOf({}),
    cursorOf({ l: "elsewhere" }),
    Buffer.from([0xff, 0xfe, 0x7b]).toString("base64url"),
  ];

  it("answers 422 invalid_cursor with a message for garbage, on every listing", async () => {
    for (const path of LISTINGS) {
      for (const cursor of GARBAGE) {
        const reply = await get(`${path}?cursor=${encodeURIComponent(cursor)}`);
        expect(reply.status, `${path} ${cursor.slice(0, 20)}`).toBe(422);
        expect(reply.body.code).toBe("invalid_cursor");
        expect(reply.body.detail).toMatch(
          /^cursor .+: pass the previous page's next_cursor unchanged, or leave cursor out to start from the first page$/,
        );
      }
    }
  });

  it("refuses one listing's cursor on another, naming both", async () => {
    const onAudit = await get(`/api/audit?cursor=${cursors.queue}`);
    expect(onAudit.status).toBe(422);
    expect(onAudit.body.detail).toMatch(/^cursor belongs to GET \/api\/queue, not GET \/api\/audit: /);
    for (const path of ["/api/queue", "/api/training/events", "/api/training/webhooks"]) {
      const reply = await get(`${path}?cursor=${cursors.audit}`);
      expect(reply.status, path).toBe(422);
      expect(reply.body.detail).toContain("cursor belongs to GET /api/audit");
    }
  });

  it("refuses an edited cursor: wrong types, out-of-range values, extra fields, a position that does not fit its order", async () => {
    const f = { order: "submitted", status: null, include_completed: false };
    const edited = [
      { l: "queue", f, k: { id: -1 } },
      { l: "queue", f, k: { id: 1.5 } },
      { l: "queue", f, k: { id: "1 OR 1=1" } },
      { l: "queue", f, k: { id: 2 ** 60 } },
      { l: "queue", f, k: { id: 1 }, admin: true },
      { l: "queue", f: { ...f, status: "completed" }, k: { id: 1 } },
      { l: "queue", f: { ...f, order: "random" }, k: { id: 1 } },
      { l: "queue", f: { ...f, order: "scheduling" }, k: { id: 1 } },
      { l: "queue", f, k: { rank: 1, priority: 10, queued_at: "2026-01-01", id: 1 } },
      { l: "queue", f: { ...f, order: "scheduling" }, k: { rank: 9, priority: 10, queued_at: "2026-01-01", id: 1 } },
      { l: "audit", f: { event_type: null, since: null, until: null }, before_id: 0 },
      { l: "events", job_id: "", index: 0 },
      { l: "events", job_id: "x", index: -3 },
      { l: "deliveries", job_id: "x".repeat(500), after_id: 0 },
    ];
    const paths = {
      queue: "/api/queue",
      audit: "/api/audit",
      events: "/api/training/events",
      deliveries: "/api/training/webhooks",
    } as Record<string, string>;
    for (const cursor of edited) {
      const reply = await get(`${paths[cursor.l]}?cursor=${cursorOf(cursor)}`);
      expect(reply.status, JSON.stringify(cursor)).toBe(422);
      expect(reply.body.code).toBe("invalid_cursor");
      expect(reply.body.detail).toContain("has been altered");
    }
    // A well-formed position someone wrote by hand is only another place in the same listing.
    const handmade = await get(`/api/queue?cursor=${cursorOf({ l: "queue", f, k: { id: 0 } })}&limit=2`);
    expect(handmade.status).toBe(200);
    expect(handmade.body.jobs.map((j: any) => j.job_id)).toEqual(
      (await get("/api/queue?order=submitted&limit=2")).body.jobs.map((j: any) => j.job_id),
    );
  });

  it("answers 422 naming limit for a negative, zero, huge or non-numeric limit", async () => {
    for (const path of LISTINGS) {
      for (const limit of ["-1", "0", "1001", "99999999999999999999", "ten", "1.5"]) {
        const reply = await get(`${path}?limit=${limit}&job_id=x`);
        expect(reply.status, `${path} limit=${limit}`).toBe(422);
        expect(reply.body.code).toBe("invalid_request");
        expect(reply.body.detail).toContain("limit");
      }
    }
  });
});
