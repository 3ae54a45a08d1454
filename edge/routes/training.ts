import { createRoute, z } from "@hono/zod-openapi";
import { EVENT_LIMITS_DEFAULTS, EventLimits, EventLimitsUpdate, EventPage, EventsQuery, StreamQuery } from "../../shared/schemas/events";
import { getSetting } from "../settings-store";
import {
  JobRef,
  TrainingCommandAnswer,
  TrainingForm,
  TrainingStatus,
  TrainingStatusQuery,
  ValidationResult,
} from "../../shared/schemas/training";
import { DeliveriesQuery, DeliveryList } from "../../shared/schemas/deliveries";
import { STALL_DEFAULTS, StallRules, StallRulesUpdate, TERMINAL_STATUSES } from "../../shared/schemas/queue";
import { continueFilters, decodeCursor, encodeCursor } from "../paging";
import { ApiError } from "../errors";
import { readConfig } from "../config";
import { hasEventsFrom, noJobYetPage, readEvents } from "../jobs/events";
import { findActiveJob } from "../jobs/active-job";
import { waitForJob } from "../jobs/waiting-stream";
import { assertCanReadJob } from "../jobs/access";
import { jobConfig } from "../jobs/config-snapshot";
import { maskSecrets } from "../../shared/secrets-mask";
import { hubOf } from "../jobs/hub-types";
import type { Context } from "hono";
import { ownerScope } from "../../shared/levels";
import type { AppEnv } from "../app-env";
import { addCommand, type TrainerCommand } from "../jobs/commands";
import { activeJobToControl, checkpointsOf, jobStatus } from "../jobs/control";
import { applyEffects } from "../jobs/lifecycle/effects";
import { cancelJob } from "../jobs/lifecycle/cancel";
import { effectsOf } from "./effects-context";
import { principalOf } from "../middleware/authorize";
import { schedulerOf } from "../jobs/objects";
import { wakeWorker } from "../workers/wake";
import { LocalSubmit, LocalSubmitResult } from "../../shared/schemas/queue";
import { submitAnswer } from "../queue/answer";
import { budgetedSubmitter } from "./budget-gate";
import { readFields } from "./body";
import { prepareTraining, saveActiveConfiguration } from "../training/forms";
import { INLINE_REQUIRED, TRAINING_DEFAULTS } from "../training/options";
import { OPTION_CATALOGUE } from "../training/option-catalogue";
import { OptionCatalogue } from "../../shared/schemas/option-catalogue";
import { createRouter } from "../router";
import { patchSetting } from "./setting-patch";
import { error, json } from "./openapi";

export const training = createRouter();

const tags = ["Training"];

training.openapi(
  createRoute({
    method: "get",
    path: "/api/training/events",
    tags,
    summary: "A job's events from since_index on",
    description:
      "Events in order with dense indexes from 0: what the trainer reported (training.progress, checkpoint.saved, validation.image with its `images`, ...) and its other output lines as `log` events. Poll with since_index = the previous answer's next_index, or with cursor = its next_cursor (it keeps the job; null once the job has ended and its last event was sent). Without job_id: the running job started last, else the job started last (among the jobs the caller may read); with none started yet, `{job_id: null, status: null, events: [], next_index: 0, next_cursor: null}`. A job's events are for its owner, leads and admins: others get 403 `not_your_job`.",
    request: { query: EventsQuery },
    responses: {
      200: json(EventPage, "Events"),
      401: error("No valid credential"),
      403: error("Another user's job"),
      404: error("No such job"),
      422: error("Invalid query or cursor (`invalid_cursor`)"),
    },
  }),
  async (c) => {
    const q = c.req.valid("query");
    const db = c.get("db");
    const scope = callerScope(c);
    if (q.cursor !== undefined && q.since_index !== undefined)
      throw new ApiError(422, "invalid_cursor", "send cursor or since_index, not both: the cursor already says where the page starts");
    const cursor = q.cursor === undefined ? null : decodeCursor("events", q.cursor);
    // A cursor keeps its job: without job_id, "the job started last" may be another one by the next page.
    const jobId = cursor
      ? continueFilters({ job_id: cursor.job_id }, { job_id: q.job_id }).job_id
      : (q.job_id ?? (await findActiveJob(db, scope, "events"))?.jobId);
    if (jobId === undefined) return c.json(noJobYetPage(), 200);
    const page = await readEvents(db, jobId, cursor?.index ?? q.since_index ?? 0, q.limit, scope);
    const ended = (TERMINAL_STATUSES as readonly string[]).includes(page.status) && !(await hasEventsFrom(db, jobId, page.next_index));
    return c.json({ ...page, next_cursor: ended ? null : encodeCursor("events", { job_id: jobId, index: page.next_index }) }, 200);
  },
);

training.openapi(
  createRoute({
    method: "get",
    path: "/api/training/events/stream",
    tags,
    summary: "A job's events live: server-sent events, or a WebSocket",
    description:
      "The same events as /api/training/events, first from since_index (default 0) and then as they arrive. With `Upgrade: websocket`, each event is a JSON text message. Otherwise server-sent events: `id` is the event index and `data` the event as JSON (read them with EventSource's onmessage); a reconnecting client sends `Last-Event-ID` and resumes right after it. When the job ends, an `end` event (WebSocket: a message with type end) carries its status and the stream closes; for an ended job the log is replayed and then it closes. Keep-alive comments every 15 s. Without job_id: the running job started last, else the job started last (among the jobs the caller may read); with none started yet the stream opens anyway and waits (SSE: keep-alive comments) for the caller's next job to start, then carries its events as above, or ends after wait_seconds (SSE: a comment saying so; WebSocket: close 1000 with that reason). A waiting stream counts as one of the user's live streams.",
    request: { query: StreamQuery },
    responses: {
      101: { description: "WebSocket" },
      200: { description: "Event stream", content: { "text/event-stream": { schema: z.string() } } },
      401: error("No valid credential"),
      403: error("Another user's job"),
      404: error("No such job"),
      422: error("Invalid query or Last-Event-ID"),
      429: error("Too many live streams (per job or per user)"),
    },
  }),
  async (c) => {
    const q = c.req.valid("query");
    const db = c.get("db");
    const scope = callerScope(c);
    const jobId = q.job_id ?? (await findActiveJob(db, scope, "events"))?.jobId;
    if (jobId !== undefined) await assertCanReadJob(db, jobId, scope); // before any stream opens
    const lastId = c.req.header("last-event-id");
    let since = q.since_index;
    if (lastId !== undefined && lastId !== "") {
      if (!/^\d{1,15}$/.test(lastId))
        throw new ApiError(
          422,
          "invalid_last_event_id",
          `Last-Event-ID must be an event index, not ${JSON.stringify(lastId.slice(0, 50))}`,
        );
      since = Number(lastId) + 1;
    }
    const userId = principalOf(c).user.id;
    const websocket = c.req.header("upgrade")?.toLowerCase() === "websocket";
    const open = (id: string) => {
      const target = new URL("https://hub/stream");
      target.searchParams.set("job_id", id);
      target.searchParams.set("since", String(since));
      target.searchParams.set("user_id", String(userId)); // the hub counts each user's watchers
      return hubOf(c.env, id).fetch(new Request(target, { headers: websocket ? { upgrade: "websocket" } : {} }));
    };
    const { keepAliveMs, streamsPerUser } = readConfig(c.env);
    if (jobId === undefined)
      return (await waitForJob({
        db,
        userId,
        streamsPerUser,
        scope,
        websocket,
        waitMs: q.wait_seconds * 1000,
        keepAliveMs,
        open,
      })) as never;
    return (await open(jobId)) as never;
  },
);

// ---- control -------------------------------------------------------------------------------

const optionalJobBody = {
  required: false,
  content: {
    "application/json": { schema: JobRef },
    "multipart/form-data": { schema: JobRef },
    "application/x-www-form-urlencoded": { schema: JobRef },
  },
};

/** `job_id` from a JSON or form body, or the query string. */
async function jobIdOf(c: Context<AppEnv>): Promise<string | undefined> {
  const value = (await readFields(c, false)).job_id ?? c.req.query("job_id");
  if (value === undefined || value === "") return undefined;
  if (typeof value !== "string" || value.length > 200)
    throw new ApiError(422, "invalid_request", "job_id must be a job id", [
      { path: "body.job_id", message: "a job id such as local-3f9c2a1b04de" },
    ]);
  return value;
}

/** Researchers act on their own jobs; leads and admins on any. */
const callerScope = (c: Context<AppEnv>) => ownerScope(principalOf(c).user);

function commandRoute(path: string, command: TrainerCommand, summary: string, message: string) {
  training.openapi(
    createRoute({
      method: "post",
      path,
      tags,
      summary,
      description: `${message}. 400 when there is no running job to act on; 409 when the named job is not running.`,
      request: { body: optionalJobBody },
      responses: {
        200: json(TrainingCommandAnswer, "Queued for the trainer"),
        400: error("No active job"),
        401: error("No valid credential"),
        403: error("Not your job"),
        404: error("No such job"),
        409: error("Not running"),
      },
    }),
    async (c) => {
      const db = c.get("db");
      const scope = callerScope(c);
      // A named job is checked (found, the caller's, running) by the write itself: one round trip.
      const jobId = (await jobIdOf(c)) ?? (await activeJobToControl(db, scope)).jobId;
      const { id, workerId } = await addCommand(db, jobId, command, { requestedBy: principalOf(c).user.id, ownerId: scope });
      await wakeWorker(c, workerId, [{ id, job_id: jobId, command }]);
      c.get("log").info(`trainer command ${command}`, { job_id: jobId, worker_id: workerId });
      return c.json({ success: true as const, job_id: jobId, message }, 200);
    },
  );
}

commandRoute(
  "/api/training/validation/run",
  "validation",
  "Run a validation now (after the next step)",
  "The trainer runs a validation with the configured prompts after its next step",
);
commandRoute(
  "/api/training/checkpoint/run",
  "checkpoint",
  "Save a checkpoint now (after the next step)",
  "The trainer saves a checkpoint after its next step, with the usual retention",
);
commandRoute(
  "/api/training/stop",
  "stop",
  "Stop the run, keeping its work: a checkpoint, then the trainer stops",
  "The trainer saves a checkpoint after its next step (asked through its signal file; the runner waits for it at most its stop grace period, 10 s by default), then is interrupted, and the job ends completed with that checkpoint listed. A trainer that has not begun training is stopped at once. Each step shows as an event (training.stop_requested, checkpoint.saved, training.stopping)",
);

training.openapi(
  createRoute({
    method: "post",
    path: "/api/training/cancel",
    tags,
    summary: "Cancel a job in any state (form field job_id)",
    description:
      "A pending or blocked job simply ends cancelled. A running one ends cancelled at once, its GPUs are released and its runner kills the trainer's whole process tree at once (SIGKILL; no checkpoint: use stop to keep the work). After a running local job is cancelled, pending local jobs are NOT started automatically (they wait with reason local_paused) until POST /api/queue/process or a restart.",
    request: { body: { required: true, content: optionalJobBody.content } },
    responses: {
      200: json(TrainingCommandAnswer, "Cancelled"),
      401: error("No valid credential"),
      403: error("Not your job"),
      404: error("No such job"),
      409: error("Already ended"),
      422: error("job_id missing"),
    },
  }),
  async (c) => {
    const jobId = await jobIdOf(c);
    if (jobId === undefined)
      throw new ApiError(422, "invalid_request", "job_id is required", [{ path: "body.job_id", message: "required" }]);
    const change = await cancelJob(c.get("db"), jobId, { ownerId: callerScope(c), actorId: principalOf(c).user.id, running: true });
    await applyEffects(effectsOf(c, "cancel"), change);
    const was = change.jobs[0]!.from;
    c.get("log").info("job cancelled", { job_id: jobId, was, by: principalOf(c).user.id });
    const message =
      was !== "running"
        ? `Job ${jobId} was ${was} and is now cancelled`
        : `Job ${jobId} is cancelled; its trainer is being killed and its GPUs are free${change.localQueueHeld ? ". Pending local jobs wait for POST /api/queue/process" : ""}`;
    return c.json({ success: true as const, job_id: jobId, message }, 200);
  },
);

training.openapi(
  createRoute({
    method: "get",
    path: "/api/training/status",
    tags,
    summary: "High-level state, active job id and startup stage",
    description:
      "For job_id, or else the running job started last, else the job queued first, among the jobs the caller may read (researchers and viewers: their own). state idle with nulls when there is none. While it runs, `expected_end_at` estimates when it ends and `expected_end_method` says how (as on its queue entry). Another user's job: 403 `not_your_job` (leads and admins read any).",
    request: { query: TrainingStatusQuery },
    responses: {
      200: json(TrainingStatus, "State"),
      401: error("No valid credential"),
      403: error("Another user's job"),
      404: error("No such job"),
    },
  }),
  async (c) => {
    const db = c.get("db");
    const scope = callerScope(c);
    let jobId = c.req.valid("query").job_id;
    if (jobId === undefined) {
      jobId = (await findActiveJob(db, scope, "status"))?.jobId;
      if (jobId === undefined) {
        return c.json(
          {
            state: "idle",
            job_id: null,
            status: null,
            config_name: null,
            startup_stage: null,
            startup_phase: null,
            progress: null,
            events: 0,
            events_bytes: 0,
            events_dropped: 0,
            attempt: null,
            allocated_gpus: null,
            started_at: null,
            completed_at: null,
            error_message: null,
            expected_end_at: null,
            expected_end_method: null,
          },
          200,
        );
      }
    } else await assertCanReadJob(db, jobId, scope);
    return c.json(await jobStatus(db, jobId), 200);
  },
);

const CheckpointList = z
  .object({
    job_id: z.string(),
    checkpoints: z.array(z.object({ name: z.string(), path: z.string(), step: z.number().int().nullable(), saved_at: z.string() })),
  })
  .openapi("CheckpointList");

training.openapi(
  createRoute({
    method: "post",
    path: "/api/training/checkpoints",
    tags,
    summary: "The checkpoints in the job's output directory",
    description:
      "From the trainer's checkpoint.saved events: every checkpoint written and not since removed by rolling retention, oldest first. For job_id, or else the caller's running job started last (a lead's or admin's: anyone's). Another user's job: 403 `not_your_job`.",
    request: { body: optionalJobBody },
    responses: {
      200: json(CheckpointList, "Checkpoints"),
      400: error("No active job"),
      401: error("No valid credential"),
      403: error("Another user's job"),
      404: error("No such job"),
    },
  }),
  async (c) => {
    const db = c.get("db");
    const scope = callerScope(c);
    let jobId = await jobIdOf(c);
    if (jobId !== undefined) await assertCanReadJob(db, jobId, scope);
    else jobId = (await activeJobToControl(db, scope)).jobId;
    return c.json({ job_id: jobId, checkpoints: await checkpointsOf(db, jobId) }, 200);
  },
);

// ---- validate and start ----------------------------------------------------------------------

const trainingBody = {
  required: true,
  content: {
    "multipart/form-data": { schema: TrainingForm },
    "application/x-www-form-urlencoded": { schema: TrainingForm },
    "application/json": { schema: TrainingForm },
  },
};
const StartResult = LocalSubmitResult.extend({
  environment: z.string().openapi({ description: "The environment the job runs (your active one, or your inline-run-<user id>)" }),
}).openapi("TrainingStart");

const DEFAULTS_TEXT = Object.entries(TRAINING_DEFAULTS)
  .map(([option, value]) => `${option} ${value}`)
  .join(", ");
const problemsMessage = (n: number) => `${n} problem${n === 1 ? "" : "s"} found`;

training.openapi(
  createRoute({
    method: "post",
    path: "/api/training/validate",
    tags,
    summary: "Check a training configuration field by field",
    description: `The form is the whole configuration: its options on top of the defaults (${DEFAULTS_TEXT}), never merged with an environment's, so the verdict depends on the form alone. Required: ${INLINE_REQUIRED.join(", ")} and one of --max_train_steps or --num_train_epochs (the other is set to 0; both set is a problem on each). A field sent as ******** stands for the secret stored at that place in the environment start would write to. Always 200: valid with message 'Configuration Valid', or the problems per field. Nothing is saved.`,
    request: { body: trainingBody },
    responses: {
      200: json(ValidationResult, "The result"),
      401: error("No valid credential"),
      403: error("Below researcher"),
      415: error("Not a form"),
      422: error("Unreadable form"),
    },
  }),
  async (c) => {
    const p = await prepareTraining(c.get("db"), await readFields(c, true), principalOf(c).user);
    const valid = p.problems.length === 0;
    return c.json(
      {
        valid,
        message: valid ? "Configuration Valid" : problemsMessage(p.problems.length),
        errors: p.problems,
        environment: p.environment,
        active_tab: p.activeTab,
        options: maskSecrets(p.options),
      },
      200,
    );
  },
);

training.openapi(
  createRoute({
    method: "get",
    path: "/api/training/options",
    tags,
    summary: "The catalogue of training options the service knows",
    description:
      "Each option's name, type (`string`, `integer`, `number`, `boolean`, `choice`, `json`), default (the service's where it fills one in, else SimpleTuner's; null: none), allowed values of a `choice`, minimum and maximum, help text, and whether it is required on a training form, admin-only or secret-looking (read back as `********`). " +
      "The dashboard's environment form and the `jobs` CLI are built from it. It describes; what refuses a value is the rules of `POST /api/training/validate`, which every environment save applies too. Any other `--` option is allowed and passed to the trainer as it is.",
    responses: { 200: json(OptionCatalogue, "The catalogue"), 401: error("No valid credential") },
  }),
  (c) => c.json({ options: [...OPTION_CATALOGUE] }, 200),
);

training.openapi(
  createRoute({
    method: "post",
    path: "/api/training/start",
    tags,
    summary: "Save the configuration and start training",
    description: `Validates as /api/training/validate (422 invalid_configuration with the problems per field as errors[].path form.<field>; nothing saved, nothing queued), writes the form on top of the defaults (${DEFAULTS_TEXT}) as your active configuration, replacing the environment's options (your active environment; with none active, your own environment "inline-run-<your user id>", created when needed), and submits the job through the Scheduler like POST /api/queue/submit: running at once where capacity exists, else queued.`,
    request: { body: trainingBody },
    responses: {
      200: json(StartResult, "Started or queued"),
      401: error("No valid credential"),
      402: error("A budget of yours or your team's is used up (`budget_exceeded`); nothing saved"),
      403: error("Below researcher"),
      415: error("Not a form"),
      422: error("Invalid configuration"),
    },
  }),
  async (c) => {
    const p = await prepareTraining(c.get("db"), await readFields(c, true), principalOf(c).user);
    if (p.problems.length) {
      throw new ApiError(
        422,
        "invalid_configuration",
        problemsMessage(p.problems.length),
        p.problems.map((e) => ({ path: `form.${e.field}`, message: e.message })),
      );
    }
    const user = principalOf(c).user;
    // Before anything is saved: a used-up budget that blocks refuses the whole request.
    const { submitter, budget } = await budgetedSubmitter(c, false);
    const environment = await saveActiveConfiguration(c.get("db"), p, user);
    const body = LocalSubmit.parse({ config_name: environment, metadata: { source: "training/start", active_tab: p.activeTab } });
    const answer = submitAnswer(await schedulerOf(c.env).submit(submitter, body));
    c.get("log").info("training started", { job_id: answer.job_id, outcome: answer.status, environment });
    return c.json({ ...answer, environment, ...(budget === null ? {} : { budget }) }, 200);
  },
);

training.openapi(
  createRoute({
    method: "get",
    path: "/api/training/webhooks",
    tags,
    summary: "The job's outbound webhook deliveries and how each went",
    description:
      "Every message sent (or being sent) to the job's --webhook_config receivers, oldest first: delivered, pending (retrying with backoff), failed (gave up, or the receiver answered a 4xx) or refused (a private target while those are not allowed). Pages of `limit` (default 100): pass `next_cursor` as `cursor` for the next (it keeps the job); null on the last page. For the job's owner, leads and admins: others get 403 `not_your_job`.",
    request: { query: DeliveriesQuery },
    responses: {
      200: json(DeliveryList, "Deliveries"),
      401: error("No valid credential"),
      403: error("Another user's job"),
      404: error("No such job"),
      422: error("No job_id, or an invalid cursor (`invalid_cursor`)"),
    },
  }),
  async (c) => {
    const q = c.req.valid("query");
    const cursor = q.cursor === undefined ? null : decodeCursor("deliveries", q.cursor);
    const { job_id } = cursor ? continueFilters({ job_id: cursor.job_id }, { job_id: q.job_id }) : { job_id: q.job_id };
    if (job_id === undefined)
      throw new ApiError(422, "invalid_request", "job_id is required (or a cursor, which keeps its job)", [
        { path: "query.job_id", message: "required" },
      ]);
    await assertCanReadJob(c.get("db"), job_id, callerScope(c));
    const page = await hubOf(c.env, job_id).deliveries(cursor?.after_id ?? 0, q.limit);
    const last = page.more ? page.deliveries.at(-1) : undefined;
    return c.json(
      { job_id, deliveries: page.deliveries, next_cursor: last ? encodeCursor("deliveries", { job_id, after_id: last.id }) : null },
      200,
    );
  },
);

const JobConfig = z
  .object({
    job_id: z.string(),
    config_name: z
      .string()
      .nullable()
      .openapi({ description: "The environment it was submitted from (it may have changed or gone since)" }),
    config: z.record(z.string(), z.unknown()).nullable().openapi({
      description: "The option map snapshotted at submit, secret-looking values masked; null for a job finished before snapshots existed",
    }),
    dataloader: z.array(z.record(z.string(), z.unknown())).nullable(),
  })
  .openapi("JobConfig");

training.openapi(
  createRoute({
    method: "get",
    path: "/api/training/config",
    tags,
    summary: "The configuration a job runs: its snapshot taken at submit",
    description:
      "The environment's option map and dataloader as they were when the job was submitted: the runner launches from this, so editing or deleting the environment later changes nothing for the job. Secret-looking values read `********`. For the job's owner, leads and admins: others get 403 `not_your_job`.",
    request: { query: z.object({ job_id: z.string().min(1).max(200) }) },
    responses: {
      200: json(JobConfig, "The snapshot"),
      401: error("No valid credential"),
      403: error("Another user's job"),
      404: error("No such job"),
      422: error("job_id missing"),
    },
  }),
  async (c) => {
    const { job_id } = c.req.valid("query");
    await assertCanReadJob(c.get("db"), job_id, callerScope(c));
    return c.json(await jobConfig(c.get("db"), job_id), 200);
  },
);

training.openapi(
  createRoute({
    method: "get",
    path: "/api/admin/event-limits",
    tags,
    summary: "What job event logs may hold, and how long an ended job's are kept (admin)",
    description: `Per job (all its attempts together): \`max_events_per_job\` (default ${EVENT_LIMITS_DEFAULTS.max_events_per_job}) and \`max_bytes_per_job\` (default 64 MiB); per user over all their jobs: \`max_bytes_per_user\` (default 1 GiB); an ended job's events are deleted \`retention_days\` (default ${EVENT_LIMITS_DEFAULTS.retention_days}) after it ended.`,
    responses: { 200: json(EventLimits, "The limits in force"), 401: error("No valid credential"), 403: error("Not an admin") },
  }),
  async (c) => c.json(await getSetting(c.get("db"), "event_limits"), 200),
);

training.openapi(
  createRoute({
    method: "put",
    path: "/api/admin/event-limits",
    tags,
    summary: "Set what job event logs may hold and how long they are kept (admin)",
    description:
      "Any fields; the others keep their value. New caps apply to the next batch of every job that has not been truncated; a truncated log stays truncated. A shorter retention deletes on the next sweeps (every 5 s, a few jobs at a time).",
    request: { body: { required: true, content: { "application/json": { schema: EventLimitsUpdate } } } },
    responses: {
      200: json(EventLimits, "The limits now in force"),
      401: error("No valid credential"),
      403: error("Not an admin"),
      422: error("Not a whole number, or a retention outside 1 to 3650 days"),
    },
  }),
  async (c) => c.json(await patchSetting(c, "event_limits", c.req.valid("json"), "event_limits_changed", "event limits"), 200),
);

training.openapi(
  createRoute({
    method: "get",
    path: "/api/admin/stall-detection",
    tags,
    summary: "When a running job counts as stalled, and the default policy (admin)",
    description: `A running job that has reported a training step and then reports none for max(\`min_seconds\`, \`factor\` x its median time per step over its last 15 steps), while it is not in a validation or a checkpoint save, is marked stalled (defaults: ${STALL_DEFAULTS.min_seconds} s, ${STALL_DEFAULTS.factor}). \`policy\` applies to users who chose none (GET /api/users/{user_id}/stall-policy).`,
    responses: { 200: json(StallRules, "The rules in force"), 401: error("No valid credential"), 403: error("Not an admin") },
  }),
  async (c) => c.json(await getSetting(c.get("db"), "stall_detection"), 200),
);

training.openapi(
  createRoute({
    method: "put",
    path: "/api/admin/stall-detection",
    tags,
    summary: "Set when a running job counts as stalled, and the default policy (admin)",
    description:
      "Any fields; the others keep their value. Applies from the Scheduler's next beat (5 s) to jobs not yet marked. Audited as `stall_detection_changed`.",
    request: { body: { required: true, content: { "application/json": { schema: StallRulesUpdate } } } },
    responses: {
      200: json(StallRules, "The rules now in force"),
      401: error("No valid credential"),
      403: error("Not an admin"),
      422: error("min_seconds not a whole number from 1 to 604800, factor not from 1 to 1000, or not a policy"),
    },
  }),
  async (c) => c.json(await patchSetting(c, "stall_detection", c.req.valid("json"), "stall_detection_changed", "stall detection"), 200),
);
