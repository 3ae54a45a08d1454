import type { Row } from "@libsql/client/web";
import { maskSecrets } from "../../shared/secrets-mask";
import type { Database } from "../db/client";
import { ApiError, notFound } from "../errors";
import { checkCanReadJob } from "./access";

/*
 * Runs (issue 29, Build 3): a job that started, seen as a training run. Its metric series and
 * validation images come from its event log (training.progress; validation.image and
 * validation.completed with `images`), or, once retention deleted that log, from what was kept
 * of it just before (run-keep.ts, tables of migration v22). Reading a run is reading the job's
 * events: its owner, leads and admins (checkCanReadJob); `scope` is shared/levels.ts ownerScope.
 */

/** The statuses a run is listed in: it started. A job sent back to pending is not a run until it runs again. */
const RUN_STATUSES = ["running", "completed", "failed", "cancelled"] as const;
type RunStatus = (typeof RUN_STATUSES)[number];

/** One reported step of a run. */
export interface RunPoint {
  step: number;
  seconds: number;
  loss: number | null;
  lr: number | null;
  step_time: number | null;
}

/** A training.progress event as read for a series. */
export interface ProgressRow {
  at: string;
  step: unknown;
  loss: unknown;
  lr: unknown;
  stepTime: unknown;
}

/** One validation image of a run, without its bytes. */
export interface RunImageRow {
  step: number | null;
  prompt: string | null;
  mimeType: string;
}

/** Image types an image route answers (the others are not served at all). */
const IMAGE_SOURCE = /^data:(image\/(?:png|jpeg|gif|webp));base64,([A-Za-z0-9+/]*={0,2})$/;

const num = (value: unknown): number | null => (typeof value === "number" && Number.isFinite(value) ? value : null);
const str = (value: unknown): string | null => (typeof value === "string" && value !== "" ? value : null);

/**
 * A run's series from its progress events in log order: a step at or below the last one (a retry
 * resumed from a checkpoint) replaces the points from there on, as the job page plots it; step
 * time is the trainer's `seconds_per_step` where it sent one, else the time between this step's
 * event and the previous one's, per step.
 *
 * @example
 * seriesFromProgress([{ at: "2026-01-01T00:00:02Z", step: 1, loss: 0.9, lr: 1e-4, stepTime: 0.5 }], Date.parse("2026-01-01T00:00:00Z"));
 * // [{ step: 1, seconds: 2, loss: 0.9, lr: 0.0001, step_time: 0.5 }]
 */
export function seriesFromProgress(rows: ProgressRow[], startMs: number): RunPoint[] {
  const points: RunPoint[] = [];
  for (const row of rows) {
    const step = num(row.step);
    const at = Date.parse(row.at);
    if (step === null || !Number.isFinite(at)) continue;
    while (points.length && points[points.length - 1]!.step >= step) points.pop();
    const seconds = (at - startMs) / 1000;
    const previous = points[points.length - 1];
    const measured = previous && step > previous.step ? (seconds - previous.seconds) / (step - previous.step) : null;
    points.push({ step, seconds, loss: num(row.loss), lr: num(row.lr), step_time: num(row.stepTime) ?? measured });
  }
  return points;
}

/**
 * At most `max` points of a series: every `stride`-th point from the first, `stride` the
 * smallest that fits, and always the last point (a run's final loss). The values are the
 * points' own, never averaged, so each one answered is one the trainer reported.
 *
 * @example
 * downsample([p1, p2, p3, p4, p5], 3); // { stride: 3, points: [p1, p4, p5] }
 */
export function downsample<T>(points: T[], max: number): { stride: number; points: T[] } {
  if (points.length <= max) return { stride: 1, points };
  // max - 1 strided points, then the last.
  const stride = Math.ceil((points.length - 1) / (max - 1));
  const out = points.filter((_, i) => i % stride === 0);
  if ((points.length - 1) % stride !== 0) out.push(points[points.length - 1]!);
  return { stride, points: out };
}

/** The place of each image among those of the same prompt and step, in order. */
export function imageIndexes(images: { step: number | null; prompt: string | null }[]): number[] {
  const seen = new Map<string, number>();
  return images.map((image) => {
    const key = JSON.stringify([image.step, image.prompt]);
    const index = seen.get(key) ?? 0;
    seen.set(key, index + 1);
    return index;
  });
}

const RUN_COLUMNS = `q.job_id, q.config_name, q.user_id, u.username, q.status, q.started_at, q.completed_at,
  EXISTS (SELECT 1 FROM kept_runs k WHERE k.job_id = q.job_id) AS kept,
  COALESCE(
    (SELECT p.step FROM run_points p WHERE p.job_id = q.job_id ORDER BY p.step DESC LIMIT 1),
    (SELECT json_extract(e.payload, '$.data.step') FROM job_events e WHERE e.job_id = q.job_id AND e.type = 'training.progress' ORDER BY e.idx DESC LIMIT 1)
  ) AS final_step,
  COALESCE(
    (SELECT p.loss FROM run_points p WHERE p.job_id = q.job_id AND p.loss IS NOT NULL ORDER BY p.step DESC LIMIT 1),
    (SELECT json_extract(e.payload, '$.data.loss') FROM job_events e
      WHERE e.job_id = q.job_id AND e.type = 'training.progress' AND json_type(e.payload, '$.data.loss') IN ('integer', 'real')
      ORDER BY e.idx DESC LIMIT 1)
  ) AS final_loss`;

function runOf(row: Row, now: number) {
  const started = String(row.started_at);
  const completed = row.completed_at === null ? null : String(row.completed_at);
  const end = completed === null ? now : Date.parse(completed);
  const duration = (end - Date.parse(started)) / 1000;
  return {
    job_id: String(row.job_id),
    environment: row.config_name === null ? null : String(row.config_name),
    user_id: row.user_id === null ? null : Number(row.user_id),
    username: row.username === null ? null : String(row.username),
    status: String(row.status) as RunStatus,
    started_at: started,
    completed_at: completed,
    duration_seconds: Number.isFinite(duration) ? Math.max(0, duration) : null,
    final_step: num(row.final_step),
    final_loss: num(row.final_loss),
    kept: Number(row.kept) === 1,
  };
}

/**
 * The runs the caller may read (`scope`: ownerScope), newest first, with their final step and
 * loss and how long they ran.
 *
 * @example
 * await listRuns(db, null, { environment: "demo", limit: 50 });
 */
export async function listRuns(db: Database, scope: number | null, filters: { environment?: string; status?: RunStatus; limit: number }) {
  const found = await db.$client.execute({
    sql: `SELECT ${RUN_COLUMNS} FROM queue_entries q LEFT JOIN users u ON u.id = q.user_id
          WHERE q.started_at IS NOT NULL AND q.status IN (SELECT value FROM json_each(?1))
            AND (?2 IS NULL OR q.user_id = ?2) AND (?3 IS NULL OR q.config_name = ?3) AND (?4 IS NULL OR q.status = ?4)
          ORDER BY q.started_at DESC, q.id DESC LIMIT ?5`,
    args: [JSON.stringify(RUN_STATUSES), scope, filters.environment ?? null, filters.status ?? null, filters.limit],
  });
  const now = Date.now();
  return found.rows.map((row) => runOf(row, now));
}

/** The job's run, or 404 (no such job), 403 (another's), 409 (it has not started). */
async function readRun(db: Database, jobId: string, scope: number | null) {
  const found = await db.$client.execute({
    sql: `SELECT ${RUN_COLUMNS}, q.config_snapshot FROM queue_entries q LEFT JOIN users u ON u.id = q.user_id WHERE q.job_id = ?`,
    args: [jobId],
  });
  const row = found.rows[0];
  checkCanReadJob(row, jobId, scope);
  if (row!.started_at === null || !(RUN_STATUSES as readonly string[]).includes(String(row!.status)))
    throw new ApiError(409, "not_a_run", `Job ${jobId} is ${String(row!.status)} and has not run yet: a run is a job that started`);
  return row!;
}

/**
 * One run with its configuration snapshot (secrets masked), for comparing options.
 *
 * @example
 * const { config } = await runDetail(db, "local-3f9c2a1b04de", null);
 */
export async function runDetail(db: Database, jobId: string, scope: number | null) {
  const row = await readRun(db, jobId, scope);
  const config = row.config_snapshot === null ? null : (JSON.parse(String(row.config_snapshot)) as Record<string, unknown>);
  return { ...runOf(row, Date.now()), config: maskSecrets(config) };
}

const isKept = (row: Row) => Number(row.kept) === 1;

/** The whole series of a run, from its kept points or its events. */
export async function allPoints(db: Database, jobId: string, kept: boolean): Promise<RunPoint[]> {
  if (kept) {
    const found = await db.$client.execute({
      sql: "SELECT step, seconds, loss, lr, step_time FROM run_points WHERE job_id = ? ORDER BY step",
      args: [jobId],
    });
    return found.rows.map((r) => ({
      step: Number(r.step),
      seconds: Number(r.seconds),
      loss: num(r.loss),
      lr: num(r.lr),
      step_time: num(r.step_time),
    }));
  }
  const [first, progress] = await db.$client.batch(
    [
      { sql: "SELECT created_at FROM job_events WHERE job_id = ? ORDER BY idx LIMIT 1", args: [jobId] },
      {
        sql: `SELECT created_at, json_extract(payload, '$.data.step') AS step, json_extract(payload, '$.data.loss') AS loss,
                COALESCE(json_extract(payload, '$.data.learning_rate'), json_extract(payload, '$.data.lr')) AS lr,
                COALESCE(json_extract(payload, '$.data.seconds_per_step'), json_extract(payload, '$.data.step_time')) AS step_time
              FROM job_events WHERE job_id = ? AND type = 'training.progress' ORDER BY idx`,
        args: [jobId],
      },
    ],
    "read",
  );
  const start = first!.rows[0] ? Date.parse(String(first!.rows[0].created_at)) : 0;
  return seriesFromProgress(
    progress!.rows.map((r) => ({ at: String(r.created_at), step: r.step, loss: r.loss, lr: r.lr, stepTime: r.step_time })),
    start,
  );
}

/**
 * A run's series, at most `maxPoints` of it (downsample).
 *
 * @example
 * await runSeries(db, "local-3f9c2a1b04de", null, 1000); // { job_id, total_points, stride, points }
 */
export async function runSeries(db: Database, jobId: string, scope: number | null, maxPoints: number) {
  const row = await readRun(db, jobId, scope);
  const points = await allPoints(db, jobId, isKept(row));
  const { stride, points: answered } = downsample(points, maxPoints);
  return { job_id: jobId, total_points: points.length, stride, points: answered };
}

/**
 * The SQL that lists a job's validation images in order from its events: every image of a
 * validation.image or validation.completed event, but a demo trainer's intermediary previews
 * (whose step is an inference step, not a training step), each numbered `n` from 0. `withSource`
 * adds each image's data URI.
 */
export const imagesFromEvents = (withSource: boolean) =>
  `SELECT row_number() OVER (ORDER BY e.idx, j.key) - 1 AS n, json_extract(e.payload, '$.data.step') AS step,
     COALESCE(json_extract(e.payload, '$.data.prompt'), json_extract(e.payload, '$.body')) AS prompt,
     json_extract(j.value, '$.mime_type') AS mime_type${withSource ? ", json_extract(j.value, '$.src') AS src" : ""}
   FROM job_events e, json_each(e.payload, '$.images') j
   WHERE e.job_id = ?1 AND e.type IN ('validation.image', 'validation.completed') AND j.type = 'object'
     AND json_type(j.value, '$.src') = 'text'
     AND COALESCE(json_extract(e.payload, '$.data.validation_type'), '') <> 'intermediary'
   ORDER BY e.idx, j.key`;

function imageRowOf(r: Row): RunImageRow {
  const src = typeof r.src === "string" ? r.src : "";
  return {
    step: num(r.step),
    prompt: str(r.prompt),
    mimeType: str(r.mime_type) ?? IMAGE_SOURCE.exec(src)?.[1] ?? "image/png",
  };
}

/**
 * A run's validation images: prompt, step, place among that prompt and step's images, and the URL
 * of its bytes.
 *
 * @example
 * await runValidations(db, "local-3f9c2a1b04de", null); // { job_id, images: [{ n: 0, step: 4, prompt: "a cat", index: 0, ... }] }
 */
export async function runValidations(db: Database, jobId: string, scope: number | null) {
  const row = await readRun(db, jobId, scope);
  const found = isKept(row)
    ? await db.$client.execute({ sql: "SELECT step, prompt, mime_type FROM run_images WHERE job_id = ? ORDER BY n", args: [jobId] })
    : await db.$client.execute({ sql: imagesFromEvents(false), args: [jobId] });
  const images = found.rows.map(imageRowOf);
  const indexes = imageIndexes(images);
  return {
    job_id: jobId,
    images: images.map((image, n) => ({
      n,
      step: image.step,
      prompt: image.prompt,
      index: indexes[n]!,
      mime_type: image.mimeType,
      url: `/api/runs/${encodeURIComponent(jobId)}/images/${n}`,
    })),
  };
}

/**
 * The bytes of a run's image `n` and their type: a PNG, JPEG, GIF or WebP the trainer sent as
 * base64; 404 for a number it does not have, or for anything else it sent there.
 *
 * @example
 * const { bytes, type } = await runImage(db, "local-3f9c2a1b04de", null, 0); // type "image/png"
 */
export async function runImage(db: Database, jobId: string, scope: number | null, n: number) {
  const row = await readRun(db, jobId, scope);
  const found = isKept(row)
    ? await db.$client.execute({ sql: "SELECT src FROM run_images WHERE job_id = ? AND n = ?", args: [jobId, n] })
    : await db.$client.execute({ sql: `${imagesFromEvents(true)} LIMIT 1 OFFSET ?2`, args: [jobId, n] });
  const match = IMAGE_SOURCE.exec(typeof found.rows[0]?.src === "string" ? found.rows[0].src : "");
  if (!match) throw notFound(`Image ${n} of run ${jobId}`);
  const binary = atob(match[2]!);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return { bytes, type: match[1]! };
}
