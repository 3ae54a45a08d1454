// Runs over HTTP (issue 29, Build 3): two SimpleTuner runs replayed from the recording of a real
// one (test/fixtures/simpletuner/webhooks-lora-run.jsonl, posted by its stand-in through the
// real runner), then listed, their series and images read, refused to others, and kept past the
// retention of their event logs.
import { createClient } from "@libsql/client";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { downsample, seriesFromProgress } from "../../edge/jobs/runs";
import { fakeSimpleTuner, removeFakeSimpleTuners } from "../helpers/simpletuner";
import { createUserWithKey, setUpAdmin, startStackWithLocalRunner, type TestStack } from "../helpers/stack";
import { until } from "../helpers/wait";

const RECORDING = readFileSync("test/fixtures/simpletuner/webhooks-lora-run.jsonl", "utf8")
  .split("\n")
  .filter(Boolean)
  .map((line) => JSON.parse(line) as Record<string, any>);

/** What the recording reported per optimizer step (SimpleTuner repeats its last one: once each). */
const RECORDED_STEPS = (() => {
  const steps = new Map<number, { loss: number; lr: number; step_time: number }>();
  for (const body of RECORDING)
    if (body.type === "training.status" && body.data?.status === "running" && body.data.global_step > 0) {
      const m = body.progress.metrics;
      steps.set(body.data.global_step, { loss: m.loss, lr: m.learning_rate, step_time: m.seconds_per_step });
    }
  return [...steps].map(([step, values]) => ({ step, ...values }));
})();
/** The recording's validation images (bare base64 PNG) with the prompt its message names. */
const RECORDED_IMAGES = RECORDING.filter((b) => b.type === "training.validation").flatMap((b) =>
  (b.images as string[]).map((base64) => ({ prompt: /^Validation: (.*)$/.exec(b.message)![1]!, base64 })),
);

describe("runs over HTTP", () => {
  const runnerDir = mkdtempSync(join(tmpdir(), "runs-api-runner-"));
  let t: TestStack;
  let admin: { key: string };
  let rita: { key: string; id: number };
  let olga: { key: string; id: number };
  let lena: { key: string };
  let vera: { key: string };
  let runA: string;
  let runB: string;

  const get = (path: string, key?: string) => t.call("GET", path, key ? { auth: { key } } : {});
  const body = async (path: string, key: string) => {
    const reply = await get(path, key);
    expect(reply.status, `${path}: ${reply.text}`).toBe(200);
    return reply.body;
  };
  const imageBytes = async (url: string, key: string) => {
    const reply = await fetch(`${t.base}${url}`, { headers: { "x-api-key": key } });
    return {
      status: reply.status,
      type: reply.headers.get("content-type"),
      nosniff: reply.headers.get("x-content-type-options"),
      bytes: Buffer.from(await reply.arrayBuffer()),
    };
  };
  async function replayEnvironment(name: string, learningRate: number) {
    expect((await t.call("POST", "/api/configs/environments", { json: { name }, auth: { key: rita.key } })).status).toBe(201);
    const form = new FormData();
    form.set("target_path", name);
    form.append("files[]", new Blob(["a cat"]), "cat.txt");
    const upload = await fetch(`${t.base}/api/datasets/upload`, { method: "POST", headers: { "x-api-key": rita.key }, body: form });
    expect(upload.status).toBe(201);
    const config = { "--num_processes": 0, "--standin_replay": "lora-run", "--learning_rate": learningRate };
    expect((await t.call("PUT", `/api/configs/${name}`, { json: { config }, auth: { key: rita.key } })).status).toBe(200);
  }
  async function submit(name: string): Promise<string> {
    const reply = await t.call("POST", "/api/queue/submit", { json: { config_name: name }, auth: { key: rita.key } });
    expect(reply.status, reply.text).toBeLessThan(300);
    return reply.body.job_id;
  }
  const completed = (job: string) =>
    until(`${job} to complete`, async () => (await get(`/api/queue/jobs/${job}`, rita.key)).body.status === "completed", {
      timeoutMs: 60_000,
    });

  beforeAll(async () => {
    t = await startStackWithLocalRunner(runnerDir, { simpletuner: fakeSimpleTuner() });
    admin = await setUpAdmin(t);
    rita = await createUserWithKey(t, { key: admin.key }, "researcher", "rita");
    olga = await createUserWithKey(t, { key: admin.key }, "researcher", "olga");
    lena = await createUserWithKey(t, { key: admin.key }, "lead", "lena");
    vera = await createUserWithKey(t, { key: admin.key }, "viewer", "vera");
    expect(
      (await t.call("POST", "/api/queue/concurrency", { json: { local_job_max_concurrent: 2 }, auth: { key: admin.key } })).status,
    ).toBe(200);
    await replayEnvironment("st-a", 0.0001);
    await replayEnvironment("st-b", 0.0003);
    runA = await submit("st-a");
    runB = await submit("st-b");
    await completed(runA);
    await completed(runB);
  }, 120_000);

  afterAll(async () => {
    await t?.stop();
    removeFakeSimpleTuners();
    rmSync(runnerDir, { recursive: true, force: true });
  });

  it("lists the caller's runs with final step, loss and duration, filtered by environment", async () => {
    const { runs } = await body("/api/runs", rita.key);
    expect(runs.map((r: any) => r.job_id).sort()).toEqual([runA, runB].sort());
    const last = RECORDED_STEPS.at(-1)!;
    for (const run of runs) {
      expect(run).toMatchObject({
        status: "completed",
        username: "rita",
        user_id: rita.id,
        final_step: 8,
        final_loss: last.loss,
        kept: false,
      });
      expect(run.duration_seconds).toBeGreaterThan(0);
      expect(Date.parse(run.completed_at)).toBeGreaterThanOrEqual(Date.parse(run.started_at));
    }
    expect((await body("/api/runs?environment=st-a", rita.key)).runs.map((r: any) => r.job_id)).toEqual([runA]);
    expect((await body("/api/runs?environment=nothing-here", rita.key)).runs).toEqual([]);
    expect((await body("/api/runs?status=failed", rita.key)).runs).toEqual([]);
    // A lead reads everyone's.
    expect((await body("/api/runs", lena.key)).runs.map((r: any) => r.job_id).sort()).toEqual([runA, runB].sort());
    // One run, with the options it ran.
    const a = await body(`/api/runs/${runA}`, rita.key);
    expect(a.config["--learning_rate"]).toBe(0.0001);
    expect((await body(`/api/runs/${runB}`, rita.key)).config["--learning_rate"]).toBe(0.0003);
  });

  it("answers each run's series as SimpleTuner reported it: every step's loss, learning rate and step time", async () => {
    for (const job of [runA, runB]) {
      const series = await body(`/api/runs/${job}/series`, rita.key);
      expect(series).toMatchObject({ job_id: job, total_points: RECORDED_STEPS.length, stride: 1 });
      expect(series.points.map((p: any) => ({ step: p.step, loss: p.loss, lr: p.lr, step_time: p.step_time }))).toEqual(RECORDED_STEPS);
      const seconds = series.points.map((p: any) => p.seconds);
      expect(seconds[0]).toBeGreaterThanOrEqual(0);
      expect([...seconds].sort((x, y) => x - y)).toEqual(seconds);
      // The same as the stored events carry.
      const events = (await body(`/api/training/events?job_id=${job}&limit=1000`, rita.key)).events.filter(
        (e: any) => e.type === "training.progress",
      );
      expect(events.map((e: any) => [e.data.step, e.data.loss, e.data.learning_rate])).toEqual(
        series.points.map((p: any) => [p.step, p.loss, p.lr]),
      );
    }
    // Downsampled: every 4th step from the first, and the last.
    const few = await body(`/api/runs/${runA}/series?points=3`, rita.key);
    expect(few).toMatchObject({ total_points: 8, stride: 4 });
    expect(few.points.map((p: any) => [p.step, p.loss])).toEqual([1, 5, 8].map((s) => [s, RECORDED_STEPS[s - 1]!.loss]));
  });

  it("lists each run's validation images with prompt and step, their bytes those of the recording", async () => {
    expect(RECORDED_IMAGES).toHaveLength(2);
    for (const job of [runA, runB]) {
      const { images } = await body(`/api/runs/${job}/validations`, rita.key);
      expect(images).toEqual(
        RECORDED_IMAGES.map((image, n) => ({
          n,
          step: 4,
          prompt: image.prompt,
          index: 0,
          mime_type: "image/png",
          url: `/api/runs/${job}/images/${n}`,
        })),
      );
      for (const [n, image] of images.entries()) {
        const got = await imageBytes(image.url, rita.key);
        expect(got).toMatchObject({ status: 200, type: "image/png", nosniff: "nosniff" });
        expect(got.bytes.equals(Buffer.from(RECORDED_IMAGES[n]!.base64, "base64"))).toBe(true);
      }
    }
  });

  it("refuses another researcher's and a viewer's reads of a run, its series, images and bytes, and lists none of it to them", async () => {
    const before = await body(`/api/runs/${runA}/series`, rita.key);
    for (const key of [olga.key, vera.key]) {
      for (const path of [`/api/runs/${runA}`, `/api/runs/${runA}/series`, `/api/runs/${runA}/validations`, `/api/runs/${runA}/images/0`]) {
        const reply = await get(path, key);
        expect(reply.status, path).toBe(403);
        expect(reply.body.code).toBe("not_your_job");
        expect(reply.text).not.toContain("iVBOR");
      }
      expect((await body("/api/runs", key)).runs).toEqual([]);
      expect((await body(`/api/runs?environment=st-a`, key)).runs).toEqual([]);
    }
    expect((await get(`/api/runs/${runA}/series`)).status).toBe(401);
    // A lead and an admin read it.
    for (const key of [lena.key, admin.key]) {
      expect(await body(`/api/runs/${runA}/series`, key)).toEqual(before);
      expect((await imageBytes(`/api/runs/${runA}/images/0`, key)).status).toBe(200);
    }
    expect((await imageBytes(`/api/runs/${runA}/images/0`, olga.key)).status).toBe(403);
    // Nothing changed for the owner.
    expect(await body(`/api/runs/${runA}/series`, rita.key)).toEqual(before);
  });

  it("says what is wrong with a bad request, with a 4xx", async () => {
    const cases: [string, number][] = [
      [`/api/runs/${runA}/images/not-a-number`, 422],
      [`/api/runs/${runA}/images/-1`, 422],
      [`/api/runs/${runA}/images/99`, 404],
      [`/api/runs/${runA}/series?points=1`, 422],
      [`/api/runs/${runA}/series?points=100000`, 422],
      ["/api/runs?status=pending", 422],
      ["/api/runs?limit=0", 422],
      ["/api/runs/local-000000000000", 404],
      ["/api/runs/local-000000000000/series", 404],
    ];
    for (const [path, status] of cases) {
      const reply = await get(path, rita.key);
      expect(reply.status, `${path}: ${reply.text}`).toBe(status);
      expect(reply.body.detail, path).toEqual(expect.any(String));
    }
  });

  it("keeps a run's series and images when retention deletes its events", async () => {
    const series = await body(`/api/runs/${runA}/series`, rita.key);
    const validations = await body(`/api/runs/${runA}/validations`, rita.key);
    const db = createClient({ url: `file:${join(t.dataDir, "service.db")}` });
    try {
      const longAgo = new Date(Date.now() - 40 * 86_400_000).toISOString();
      await db.execute({ sql: "UPDATE queue_entries SET completed_at = ? WHERE job_id = ?", args: [longAgo, runA] });
    } finally {
      db.close();
    }
    // The Scheduler's sweep deletes the log (retention: 30 days by default).
    await until("run A's events to go", async () => (await body(`/api/training/events?job_id=${runA}`, rita.key)).events.length === 0, {
      timeoutMs: 20_000,
      everyMs: 250,
    });
    expect(await body(`/api/runs/${runA}/series`, rita.key)).toEqual(series);
    expect(await body(`/api/runs/${runA}/validations`, rita.key)).toEqual(validations);
    const bytes = await imageBytes(`/api/runs/${runA}/images/1`, rita.key);
    expect(bytes.bytes.equals(Buffer.from(RECORDED_IMAGES[1]!.base64, "base64"))).toBe(true);
    const listed = (await body("/api/runs", rita.key)).runs.find((r: any) => r.job_id === runA);
    expect(listed).toMatchObject({ kept: true, final_step: 8, final_loss: RECORDED_STEPS.at(-1)!.loss });
    // Still another's to olga.
    expect((await get(`/api/runs/${runA}/images/1`, olga.key)).status).toBe(403);
    // Run B, recently ended, keeps its log.
    expect((await body(`/api/training/events?job_id=${runB}`, rita.key)).events.length).toBeGreaterThan(0);
  }, 40_000);
});

describe("series rules", () => {
  const at = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s)).toISOString();
  it("lets a retry's steps replace the failed attempt's and measures a step's time where the trainer sent none", () => {
    const rows = [
      { at: at(2), step: 1, loss: 1, lr: 0.1, stepTime: null },
      { at: at(4), step: 2, loss: 0.9, lr: 0.1, stepTime: null },
      { at: at(6), step: 3, loss: 0.8, lr: 0.1, stepTime: null },
      { at: at(20), step: 2, loss: 0.95, lr: 0.1, stepTime: 1.5 },
      { at: at(23), step: 4, loss: 0.7, lr: "x", stepTime: null },
    ];
    expect(seriesFromProgress(rows, Date.parse(at(0)))).toEqual([
      { step: 1, seconds: 2, loss: 1, lr: 0.1, step_time: null },
      { step: 2, seconds: 20, loss: 0.95, lr: 0.1, step_time: 1.5 },
      { step: 4, seconds: 23, loss: 0.7, lr: null, step_time: 1.5 },
    ]);
  });

  it("downsamples to at most the points asked for, keeping the first and the last", () => {
    const points = Array.from({ length: 10_001 }, (_, i) => i);
    const { stride, points: kept } = downsample(points, 1000);
    expect(kept.length).toBeLessThanOrEqual(1000);
    expect(kept[0]).toBe(0);
    expect(kept.at(-1)).toBe(10_000);
    expect(stride).toBe(11);
    expect(downsample([1, 2, 3], 3)).toEqual({ stride: 1, points: [1, 2, 3] });
    expect(downsample([1, 2, 3, 4, 5], 3)).toEqual({ stride: 2, points: [1, 3, 5] });
    expect(downsample([1, 2, 3, 4, 5, 6], 3)).toEqual({ stride: 3, points: [1, 4, 6] });
  });
});
