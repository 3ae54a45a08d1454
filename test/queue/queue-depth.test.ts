// Submissions behind a full box and the listing's pages over real HTTP: a submission group is
// decided over the last full plan (edge/scheduler/frontier.ts) and the listing reads a page from
// the scheduling-order index (migration 0027); neither may change what a client sees.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { gpuInventory, registerWorker } from "../helpers/boxes";
import { createUserWithKey, setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";

let t: TestStack;
let admin: { key: string; cookie: string };
let lead: { key: string };
let researcher: { key: string };

const submit = async (who: { key: string }, config_name: string) => {
  const answer = await t.call("POST", "/api/queue/submit", { json: { config_name, target: "local" }, auth: { key: who.key } });
  expect(answer.status).toBe(200);
  return answer.body as { job_id: string; status: string; queue_position: number | null };
};

/** Every active entry, `limit` a page, following next_cursor; with each page's size. */
async function walk(limit: number): Promise<{ jobs: any[]; pages: number[] }> {
  const jobs: any[] = [];
  const pages: number[] = [];
  let cursor: string | null = null;
  do {
    const page: { status: number; body: any } = await t.call("GET", `/api/queue?limit=${limit}${cursor ? `&cursor=${cursor}` : ""}`, {
      auth: { key: admin.key },
    });
    expect(page.status).toBe(200);
    jobs.push(...page.body.jobs);
    pages.push(page.body.jobs.length);
    cursor = page.body.next_cursor;
  } while (cursor !== null);
  return { jobs, pages };
}

beforeAll(async () => {
  t = await startTestStack();
  admin = await setUpAdmin(t);
  lead = await createUserWithKey(t, { cookie: admin.cookie }, "lead");
  researcher = await createUserWithKey(t, { cookie: admin.cookie }, "researcher");
  for (const [name, n] of [
    ["one-gpu", 1],
    ["two-gpu", 2],
  ] as const) {
    expect((await t.call("POST", "/api/configs/environments", { json: { name }, auth: { key: admin.key } })).status).toBe(201);
    const put = await t.call("PUT", `/api/configs/${name}`, { json: { config: { "--num_processes": n } }, auth: { key: admin.key } });
    expect(put.status).toBe(200);
  }
  // Two-GPU jobs wait for an admin's approval: the blocked group of the listing.
  expect((await t.call("PUT", "/api/queue/approval-rules", { json: { local_gpu_threshold: 1 }, auth: { key: admin.key } })).status).toBe(
    200,
  );
  expect((await t.call("POST", "/api/queue/concurrency", { json: { local_job_max_concurrent: 8 }, auth: { key: admin.key } })).status).toBe(
    200,
  );
  await registerWorker(t, admin.key, "box", "local", gpuInventory(2, "NVIDIA A100-SXM4-80GB"));
});
afterAll(async () => {
  await t?.stop();
});

describe("a queue behind a full box", () => {
  it("answers each submission with its place in the whole queue, and lists running, pending and blocked a page at a time, each entry once", async () => {
    const running = [await submit(researcher, "one-gpu"), await submit(researcher, "one-gpu")];
    expect(running.map((r) => r.status)).toEqual(["running", "running"]);
    // Each new job's place among those waiting when it came: level priority (admin 30, lead 20,
    // researcher 10), then submission.
    const r1 = await submit(researcher, "one-gpu");
    const l1 = await submit(lead, "one-gpu");
    const r2 = await submit(researcher, "one-gpu");
    const a1 = await submit(admin, "one-gpu");
    const l2 = await submit(lead, "one-gpu");
    expect([r1, l1, r2, a1, l2].map((s) => [s.status, s.queue_position])).toEqual([
      ["queued", 1],
      ["queued", 1],
      ["queued", 3],
      ["queued", 1],
      ["queued", 3],
    ]);
    const blocked = await submit(researcher, "two-gpu");
    expect(blocked.status).toBe("blocked");

    const expected = [
      ...running.map((r) => [r.job_id, "running", null]),
      [a1.job_id, "pending", 1],
      [l1.job_id, "pending", 2],
      [l2.job_id, "pending", 3],
      [r1.job_id, "pending", 4],
      [r2.job_id, "pending", 5],
      [blocked.job_id, "blocked", null],
    ];
    const shown = (jobs: any[]) => jobs.map((j) => [j.job_id, j.status, j.position]);
    // As the submissions left it, then after a full pass over everything: the same.
    const walked = await walk(3);
    expect(walked.pages).toEqual([3, 3, 2]);
    expect(shown(walked.jobs)).toEqual(expected);
    expect((await t.call("POST", "/api/queue/process", { json: {}, auth: { key: admin.key } })).status).toBe(200);
    expect(shown((await walk(2)).jobs)).toEqual(expected);
    expect(shown((await walk(100)).jobs)).toEqual(expected);
  });
});
