import { createRoute, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import { ownerScope } from "../../shared/levels";
import { ErrorBody } from "../../shared/schemas/common";
import {
  ApprovalRules,
  ApprovalRulesUpdate,
  CleanupQuery,
  CleanupResult,
  ConcurrencySettings,
  ConcurrencyUpdate,
  JobActionResult,
  JobIdParam,
  LocalSubmit,
  LocalSubmitResult,
  MyQueue,
  Position,
  PriorityUpdate,
  ProcessResult,
  QueueHistory,
  QueueHistoryQuery,
  QueueJob,
  QueueList,
  QueueListQuery,
  QueueStats,
  RejectQuery,
  RetryResult,
} from "../../shared/schemas/queue";
import type { AppEnv } from "../app-env";
import { auditLater, changedFields } from "../audit/trail";
import { principalOf } from "../middleware/authorize";
import { getEntry, listEntries, toQueueEntry, userEntries, userIdNamed, visibleEntry, type EntryRow } from "../queue/entries";
import { readQueueHistory } from "../queue/history";
import { queueHubOf, schedulerOf } from "../jobs/objects";
import { queueStats } from "../queue/stats";
import { submitAnswer } from "../queue/answer";
import { budgetedSubmitter, submitWithinBudget } from "./budget-gate";
import { applyEffects } from "../jobs/lifecycle/effects";
import { approveJob } from "../jobs/lifecycle/approve";
import { cancelJob } from "../jobs/lifecycle/cancel";
import { cleanupQueue } from "../jobs/lifecycle/cleanup";
import { prioritiseJob } from "../jobs/lifecycle/prioritise";
import { rejectJob } from "../jobs/lifecycle/reject";
import { prepareRetry, readLineage } from "../jobs/lifecycle/retry";
import { effectsOf } from "./effects-context";
import { createRouter } from "../router";
import { continueFilters, decodeCursor, encodeCursor } from "../paging";
import { json } from "./openapi";
import type { WaitInfo } from "../jobs/job";
import { getSetting, setSetting } from "../settings-store";

export const queue = createRouter();

const tags = ["Queue"];
const errors = {
  401: json(ErrorBody, "No valid credential"),
  403: json(ErrorBody, "Level too low"),
  404: json(ErrorBody, "No such job"),
  409: json(ErrorBody, "The job is not in a state that allows this"),
  422: json(ErrorBody, "Invalid request"),
};

/** Stored rows as the API shows them, with live positions, reasons and expected run times from the Scheduler. */
async function present(c: Context<AppEnv>, rows: EntryRow[]) {
  const waiting = rows.filter((r) => r.status === "pending").map((r) => r.id);
  const [info, limits] = await Promise.all([
    waiting.length ? schedulerOf(c.env).waitInfo(waiting) : Promise.resolve([] as WaitInfo[]),
    getSetting(c.get("db"), "concurrency"),
  ]);
  const byId = new Map(info.map((w) => [w.id, w]));
  return rows.map((row) => toQueueEntry(row, byId, limits.starvation_threshold_minutes));
}

/** Lets the Scheduler act on a change now rather than at its next tick. */
function nudge(c: Context<AppEnv>, trigger: string, changed: string[] = [], rereadAll = false) {
  return schedulerOf(c.env).pass(trigger, changed, rereadAll);
}

queue.openapi(
  createRoute({
    method: "get",
    path: "/api/queue",
    tags,
    summary: "List queue entries, a page at a time",
    description: [
      "Your own jobs in full; other users' jobs with only the public fields (id, job_id, user_id, owner, status, priority, effective_priority, position, wait_reason, wait_message, expected_start_at, queued_at). Leads and admins see every job in full.",
      "Pages: at most `limit` entries; `next_cursor` (null on the last page) passed as `cursor` gives the next page, with the first page's filters and order (send none, or the same).",
      "`order=scheduling` (default): running, pending, blocked, then ended entries; each group by priority (override, else the level's; highest first), queued_at, id. Pending entries within a page are shown in their live Scheduler order: `position` (1 = next) is the scheduling order, starvation boost included. A job whose status or priority changes while you page may move behind your cursor (skipped) or ahead of it (listed again).",
      "`order=submitted`: by id, oldest first. A walk lists every entry that matches the filter throughout exactly once, however many jobs are submitted meanwhile (they come last): use it to go through the whole queue.",
      "Estimates, on full entries only: a running job's `expected_end_at` with `expected_end_method`, a pending job's `expected_minutes` with `expected_minutes_method`, `expected_run_seconds` with `expected_run_basis`, and `expected_start_basis` (what each means is on the fields). `expected_start_at`, when a waiting job is expected to start (the last pass's plan run forward in time), is public. They are estimates: a job may start or end before or after.",
      "`user=<username>`: only that user's entries (404 `no_such_user` when nobody has that name); `total` counts them. Anyone may filter: another user's entries still show only the public fields to researchers and viewers.",
    ].join("\n\n"),
    request: { query: QueueListQuery },
    responses: {
      200: json(QueueList, "One page of entries"),
      401: errors[401],
      404: json(ErrorBody, "No user of that name (`no_such_user`)"),
      422: json(ErrorBody, "Invalid query or cursor (`invalid_cursor`)"),
    },
  }),
  async (c) => {
    const q = c.req.valid("query");
    const db = c.get("db");
    const cursor = q.cursor === undefined ? null : decodeCursor("queue", q.cursor);
    const asked = { order: q.order, status: q.status, include_completed: q.include_completed, user: q.user };
    const f = cursor
      ? continueFilters(cursor.f, asked)
      : { order: q.order ?? "scheduling", status: q.status ?? null, include_completed: q.include_completed ?? false, user: q.user ?? null };
    const page = await listEntries(db, {
      status: f.status,
      userId: f.user === null ? null : await userIdNamed(db, f.user),
      limit: q.limit,
      includeCompleted: f.include_completed,
      order: f.order,
      after: cursor?.k,
    });
    const jobs = await present(c, page.rows);
    // Pending jobs of the page in the Scheduler's order (priority with boost, then submission time).
    if (f.order === "scheduling")
      jobs.sort((a, b) => (a.status === "pending" && b.status === "pending" ? (a.position ?? Infinity) - (b.position ?? Infinity) : 0));
    const scope = ownerScope(principalOf(c).user);
    const next_cursor = page.next ? encodeCursor("queue", { f, k: page.next }) : null;
    return c.json({ jobs: jobs.map((job) => visibleEntry(job, scope)), total: page.total, next_cursor }, 200);
  },
);

queue.openapi(
  createRoute({
    method: "get",
    path: "/api/queue/stats",
    tags,
    summary: "Queue statistics",
    description:
      "Pending and running cloud jobs, the mean wait of the last 7 days, counts by status and per user id, the limits in force, and the local box's devices with the job holding each. Counts only: nothing private of other users' jobs.",
    responses: { 200: json(QueueStats, "Statistics"), 401: errors[401] },
  }),
  async (c) => {
    const db = c.get("db");
    return c.json(await queueStats(db, await getSetting(db, "concurrency")), 200);
  },
);

queue.openapi(
  createRoute({
    method: "get",
    path: "/api/queue/history",
    tags,
    summary: "Queue depth and waits over the last hours",
    description:
      "Buckets of 5 minutes (up to 6 hours) or 30 minutes over the last `hours` (1 to 168, default 24), each with `at` (its end, unix seconds), `depth` (jobs pending or blocked at that moment), `started` (jobs started within it) and `mean_wait_seconds` (their mean wait from submission; null when none started). Computed from the entries' queued_at, started_at and completed_at; cleaned-up entries are gone from it. Counts only: nothing of any job is shown.",
    request: { query: QueueHistoryQuery },
    responses: { 200: json(QueueHistory, "The buckets, oldest first"), 401: errors[401], 422: errors[422] },
  }),
  async (c) => c.json(await readQueueHistory(c.get("db"), c.req.valid("query").hours), 200),
);

queue.openapi(
  createRoute({
    method: "get",
    path: "/api/queue/changes",
    tags,
    summary: "Jobs' status changes, live: server-sent events",
    description:
      'A server-sent events stream that says when jobs change status, so a client reloads what it shows of the queue instead of polling. First `event: ready` (data `{"at"}`), then for every change (a submission, an admission, an approval or rejection, a priority change, a cancel, a job ending or sent back to the queue) one `event: change` with data `{"jobs":[{"job_id","from","to"}],"at"}` (`from` null for a new job; the same status for a priority change). Only ids and statuses, which `GET /api/queue` shows everyone: read the rest there, with your own access. Nothing is replayed: after a reconnect, reload the queue. Keep-alive comments every 15 s. The stream counts as one of your live streams (at most 10 per user with the job event streams; 429 `too_many_watchers` beyond).',
    responses: {
      200: { description: "Event stream", content: { "text/event-stream": { schema: z.string() } } },
      401: errors[401],
      429: json(ErrorBody, "Too many live streams for this user"),
    },
  }),
  async (c) => {
    const target = new URL("https://hub/changes");
    target.searchParams.set("user_id", String(principalOf(c).user.id)); // the hub leases each user's watchers
    return (await queueHubOf(c.env).fetch(new Request(target))) as never;
  },
);

queue.openapi(
  createRoute({
    method: "get",
    path: "/api/queue/me",
    tags,
    summary: "The caller's jobs and best position",
    description: "Your pending, running and blocked jobs, with your best position in the queue.",
    responses: { 200: json(MyQueue, "Your queue"), 401: errors[401] },
  }),
  async (c) => {
    const jobs = await present(c, await userEntries(c.get("db"), principalOf(c).user.id));
    const pending = jobs.filter((j) => j.status === "pending").sort((a, b) => (a.position ?? Infinity) - (b.position ?? Infinity));
    const positions = pending.map((j) => j.position).filter((p): p is number => p !== null);
    return c.json(
      {
        pending_count: pending.length,
        running_count: jobs.filter((j) => j.status === "running").length,
        blocked_count: jobs.filter((j) => j.status === "blocked").length,
        best_position: positions.length ? Math.min(...positions) : null,
        pending_jobs: pending,
        running_jobs: jobs.filter((j) => j.status === "running"),
        blocked_jobs: jobs.filter((j) => j.status === "blocked"),
      },
      200,
    );
  },
);

queue.openapi(
  createRoute({
    method: "get",
    path: "/api/queue/position/{job_id}",
    tags,
    summary: "A job's live place in the queue and why it waits",
    description:
      "The job's live `position` among pending jobs (1 = next), how many wait ahead of it, its effective priority, `wait_reason` with a message, and `expected_start_at` (when it is expected to start; null when unknown). `expected_start_basis` says how that was estimated, for your own job (leads and admins: any job); null otherwise. Any job's position is readable; nothing private of it is shown.",
    request: { params: JobIdParam },
    responses: { 200: json(Position, "Position"), 401: errors[401], 404: errors[404] },
  }),
  async (c) => {
    const [job] = await present(c, [await getEntry(c.get("db"), c.req.valid("param").job_id)]);
    const shown = visibleEntry(job!, ownerScope(principalOf(c).user));
    return c.json(
      {
        job_id: job!.job_id,
        status: job!.status,
        position: job!.position,
        waiting_ahead: job!.position === null ? null : job!.position - 1,
        wait_reason: job!.wait_reason,
        wait_message: job!.wait_message,
        effective_priority: job!.effective_priority,
        expected_start_at: job!.expected_start_at,
        expected_start_basis: "expected_start_basis" in shown ? shown.expected_start_basis : null,
      },
      200,
    );
  },
);

queue.openapi(
  createRoute({
    method: "get",
    path: "/api/queue/jobs/{job_id}",
    tags,
    summary: "One queue entry, with its live place and why it waits",
    description:
      "The entry as GET /api/queue lists it, with its live `position` and `wait_reason` while pending: your own job in full, with its `lineage` (the chain of retries it belongs to: its id, jobs, GPU-hours and cost); another user's job with only the public fields (id, job_id, user_id, owner, status, priority, effective_priority, position, wait_reason, wait_message, expected_start_at, queued_at). Leads and admins see any job in full. An unknown job_id is 404 `not_found`.",
    request: { params: JobIdParam },
    responses: { 200: json(QueueJob, "The entry"), 401: errors[401], 404: errors[404], 422: errors[422] },
  }),
  async (c) => {
    const { job_id } = c.req.valid("param");
    const [job] = await present(c, [await getEntry(c.get("db"), job_id)]);
    const shown = visibleEntry(job!, ownerScope(principalOf(c).user));
    if (!("job_type" in shown)) return c.json(shown, 200);
    const lineage = await readLineage(c.get("db"), job_id);
    return c.json(lineage ? { ...shown, lineage } : shown, 200);
  },
);

queue.openapi(
  createRoute({
    method: "post",
    path: "/api/queue/submit",
    tags,
    summary: "Submit a local job",
    description: [
      "GPU requirements come from the environment: `--num_processes` (0 = a CPU job) and `--accelerate_visible_devices` (preferred devices, ignored with any_gpu). The Scheduler decides in one step: running (with allocated_gpus or a worker), queued (with queue_position and wait_reason), rejected (no_wait and no capacity; nothing is stored), or blocked (an approval rule caught it).",
      '`dry_run: true` answers what this submission would do now, with `dry_run: true`, `job_id: null` and a message starting "would", and stores nothing: no job, no approval request, no event, no GPU taken, no other job\'s admission changed. A job that would wait also gets `expected_start_at` with `expected_start_basis` (when it would be expected to start, after the jobs ahead of it, or unknown and why) and `expected_run_seconds` with `expected_run_basis`. An invalid submission answers the same 404 or 422 as a real one.',
    ].join("\n\n"),
    request: { body: { required: true, content: { "application/json": { schema: LocalSubmit } } } },
    responses: {
      200: json(LocalSubmitResult, "Decided"),
      401: errors[401],
      402: json(ErrorBody, "A budget of yours or your team's is used up and the admin blocks submissions then (`budget_exceeded`)"),
      403: errors[403],
      404: json(ErrorBody, "No such environment"),
      422: errors[422],
    },
  }),
  async (c) => {
    const body = c.req.valid("json");
    if (body.dry_run) {
      const { submitter, budget } = await budgetedSubmitter(c, true);
      const answer = submitAnswer(await schedulerOf(c.env).preview(submitter, body), true);
      return c.json(budget === null ? answer : { ...answer, budget }, 200);
    }
    const { outcome, budget } = await submitWithinBudget(c, body);
    const answer = submitAnswer(outcome);
    c.get("log").info("local job submitted", { job_id: answer.job_id, outcome: answer.status, user_id: principalOf(c).user.id });
    return c.json(budget === null ? answer : { ...answer, budget }, 200);
  },
);

async function actionResult(c: Context<AppEnv>, jobId: string) {
  const [job] = await present(c, [await getEntry(c.get("db"), jobId)]);
  return { success: true as const, job: job! };
}

queue.openapi(
  createRoute({
    method: "post",
    path: "/api/queue/{job_id}/cancel",
    tags,
    summary: "Cancel a job that has not started",
    description:
      "Pending and blocked jobs only; researchers may cancel their own jobs, leads and admins any. A running job answers 409: stop it through the training endpoints.",
    request: { params: JobIdParam },
    responses: { 200: json(JobActionResult, "Cancelled"), ...errors },
  }),
  async (c) => {
    const { job_id } = c.req.valid("param");
    const { user } = principalOf(c);
    await applyEffects(
      effectsOf(c, "cancel"),
      await cancelJob(c.get("db"), job_id, { ownerId: ownerScope(user), actorId: user.id, running: false }),
    );
    return c.json(await actionResult(c, job_id), 200);
  },
);

queue.openapi(
  createRoute({
    method: "post",
    path: "/api/queue/{job_id}/retry",
    tags,
    summary: "Retry a failed, cancelled or stopped job, continuing from its checkpoint",
    description: [
      "A new job linked to this one (`retry_of`, and the lineage they share) with the same configuration snapshot and placement (GPUs, target, worker labels), owned by the same user, resuming from the old job's newest intact checkpoint: one whose `checkpoint.saved` event was recorded, newest step first (`resume_from` in the answer). The runner copies that checkpoint from the old job's directory into the new job's output directory, or the next older one it still finds there, and starts the trainer with `--resume_from_checkpoint latest`; where it finds none (another box ran the old job, the checkpoint was removed) the job starts from step 0 and its log says so. Decided by the Scheduler as any submission: running, queued, or blocked by an approval rule, under the same limits. The lineage's GPU-hours and cost are on GET /api/queue/jobs/{job_id}.",
      "The owner, leads and admins may retry (as for a cancel): another researcher gets 403 `not_your_job`, a viewer 403, with nothing queued. A job that is pending, blocked, running or completed without a stop answers 409 `job_not_retryable` naming its status; a cloud job 409 `resume_unsupported` (submit its environment again). A retry of another user's job is audited (`job_retried`). Takes an `Idempotency-Key` like the submit routes.",
    ].join("\n\n"),
    request: { params: JobIdParam },
    responses: { 200: json(RetryResult, "The new job, decided"), ...errors },
  }),
  async (c) => {
    const { job_id } = c.req.valid("param");
    const { user } = principalOf(c);
    const actor = { id: user.id, team_id: user.team_id, priority: user.priority, level: user.level };
    const job = await prepareRetry(c.get("db"), job_id, { actor, ownerScope: ownerScope(user) });
    const answer = submitAnswer(await schedulerOf(c.env).submitJob(job));
    if (job.userId !== user.id)
      auditLater(c, { event_type: "job_retried", target: job_id, details: { new_job_id: job.jobId, owner_id: job.userId } });
    c.get("log").info("job retried", { job_id: answer.job_id, retry_of: job_id, outcome: answer.status, user_id: user.id });
    const resume = job.retry!.resumeFrom[0];
    return c.json(
      {
        ...answer,
        retry_of: job_id,
        lineage_id: job.retry!.lineageId,
        resume_from: resume ? { job_id: resume.job_id, checkpoint: resume.path.split("/").pop()!, step: resume.step } : null,
      },
      200,
    );
  },
);

queue.openapi(
  createRoute({
    method: "post",
    path: "/api/queue/{job_id}/approve",
    tags,
    summary: "Approve a blocked job (admin)",
    description:
      "A job caught by an approval rule waits `blocked` until this: it becomes pending and the Scheduler starts it when it fits. Audited as `job_approved`.",
    request: { params: JobIdParam },
    responses: { 200: json(JobActionResult, "Approved: now pending"), ...errors },
  }),
  async (c) => {
    const { job_id } = c.req.valid("param");
    await applyEffects(effectsOf(c, "approval"), await approveJob(c.get("db"), job_id, principalOf(c).user.id));
    return c.json(await actionResult(c, job_id), 200);
  },
);

queue.openapi(
  createRoute({
    method: "post",
    path: "/api/queue/{job_id}/reject",
    tags,
    summary: "Reject a blocked job (admin)",
    description: "The job ends `cancelled` with error_message `Rejected: <reason>`; the reason is also recorded on its approval request.",
    request: { params: JobIdParam, query: RejectQuery },
    responses: { 200: json(JobActionResult, "Rejected"), ...errors },
  }),
  async (c) => {
    const { job_id } = c.req.valid("param");
    const { reason } = c.req.valid("query");
    await applyEffects(effectsOf(c, "rejection"), await rejectJob(c.get("db"), job_id, principalOf(c).user.id, reason));
    return c.json(await actionResult(c, job_id), 200);
  },
);

queue.openapi(
  createRoute({
    method: "post",
    path: "/api/queue/{job_id}/priority",
    tags,
    summary: "Override a waiting job's priority (lead, admin)",
    description:
      "Sets the waiting job's `priority_override` (0 to 100 on the levels' scale, where admin is 30; null returns to its level's priority). The starvation boost still adds to it, and the Scheduler reorders at once. Audited as `priority_overridden`.",
    request: { params: JobIdParam, body: { required: true, content: { "application/json": { schema: PriorityUpdate } } } },
    responses: { 200: json(JobActionResult, "Re-prioritised"), ...errors },
  }),
  async (c) => {
    const { job_id } = c.req.valid("param");
    const { priority } = c.req.valid("json");
    await applyEffects(effectsOf(c, "priority"), await prioritiseJob(c.get("db"), job_id, priority));
    return c.json(await actionResult(c, job_id), 200);
  },
);

queue.openapi(
  createRoute({
    method: "get",
    path: "/api/queue/concurrency",
    tags,
    summary: "Limits and scheduler settings",
    description:
      "`max_concurrent`, `user_max_concurrent`, `team_max_concurrent` with `enable_fair_share` (cloud jobs); `local_job_max_concurrent`, `local_gpu_max_concurrent` (the local box); `starvation_threshold_minutes`, `worker_heartbeat_timeout_seconds` (the Scheduler).",
    responses: { 200: json(ConcurrencySettings, "Settings"), 401: errors[401] },
  }),
  async (c) => c.json(await getSetting(c.get("db"), "concurrency"), 200),
);

queue.openapi(
  createRoute({
    method: "post",
    path: "/api/queue/concurrency",
    tags,
    summary: "Change limits (admin)",
    description:
      "Send any subset of the fields, local and cloud together; the rest keep their values. Applied at once by a scheduler pass.",
    request: { body: { required: true, content: { "application/json": { schema: ConcurrencyUpdate } } } },
    responses: { 200: json(ConcurrencySettings, "The settings now in force"), 401: errors[401], 403: errors[403], 422: errors[422] },
  }),
  async (c) => {
    const db = c.get("db");
    const previous = await getSetting(db, "concurrency");
    const next = { ...previous, ...c.req.valid("json") };
    await setSetting(db, "concurrency", next);
    auditLater(c, { event_type: "limits_changed", target: "concurrency", details: { changed: changedFields(previous, next) } });
    c.get("log").info("concurrency settings changed", { by: principalOf(c).user.id, settings: next });
    await nudge(c, "limits");
    return c.json(next, 200);
  },
);

queue.openapi(
  createRoute({
    method: "get",
    path: "/api/queue/approval-rules",
    tags,
    summary: "When submissions need approval",
    description:
      "`local_gpu_threshold` (local jobs asking for more GPUs need an admin's approval; default null: never) and `cloud_cost_threshold` (cloud jobs estimated at this many dollars or more; default 50).",
    responses: { 200: json(ApprovalRules, "Rules"), 401: errors[401] },
  }),
  async (c) => c.json(await getSetting(c.get("db"), "approval_rules"), 200),
);

queue.openapi(
  createRoute({
    method: "put",
    path: "/api/queue/approval-rules",
    tags,
    summary: "Change the approval rules (admin)",
    description: "Applies to later submissions; jobs already queued keep their state.",
    request: { body: { required: true, content: { "application/json": { schema: ApprovalRulesUpdate } } } },
    responses: { 200: json(ApprovalRules, "Rules now in force"), 401: errors[401], 403: errors[403], 422: errors[422] },
  }),
  async (c) => {
    const db = c.get("db");
    const previous = await getSetting(db, "approval_rules");
    const next = { ...previous, ...c.req.valid("json") };
    await setSetting(db, "approval_rules", next);
    auditLater(c, { event_type: "approval_rules_changed", target: "approval_rules", details: { changed: changedFields(previous, next) } });
    return c.json(next, 200);
  },
);

queue.openapi(
  createRoute({
    method: "post",
    path: "/api/queue/process",
    tags,
    summary: "Run a scheduler pass now (admin)",
    description:
      "The Scheduler passes every 5 s and on every change anyway; this also resumes the local queue held after a running local job was cancelled.",
    responses: { 200: json(ProcessResult, "What the pass started"), 401: errors[401], 403: errors[403] },
  }),
  async (c) => {
    // A manual pass re-reads every active entry, whatever changed behind the Scheduler's back,
    // and lifts the hold a cancelled running local job put on the local queue.
    await setSetting(c.get("db"), "local_queue_paused", false);
    const result = await nudge(c, "manual", [], true);
    return c.json({ success: true as const, started: result.started, waiting: result.waiting }, 200);
  },
);

queue.openapi(
  createRoute({
    method: "post",
    path: "/api/queue/cleanup",
    tags,
    summary: "Delete old finished entries (admin)",
    description:
      "Deletes completed, failed and cancelled entries whose completed_at is more than `days` days ago (1 to 365, default 30). Active entries are never deleted.",
    request: { query: CleanupQuery },
    responses: { 200: json(CleanupResult, "Deleted"), 401: errors[401], 403: errors[403], 422: errors[422] },
  }),
  async (c) => {
    const { days } = c.req.valid("query");
    const deleted = await cleanupQueue(c.get("db"), days);
    c.get("log").info("queue cleaned up", { days, deleted, by: principalOf(c).user.id });
    return c.json({ success: true, deleted, days }, 200);
  },
);
