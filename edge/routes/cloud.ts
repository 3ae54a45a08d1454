import { createRoute, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import { ownerScope } from "../../shared/levels";
import { CloudJob, CloudSettings, CloudSettingsUpdate, CloudSubmit, CloudSubmitAnswer, HardwareRates } from "../../shared/schemas/cloud";
import { JobIdParam } from "../../shared/schemas/queue";
import type { AppEnv } from "../app-env";
import { auditLater, changedFields } from "../audit/trail";
import { readCloudJob } from "../cloud/record";
import type { PackageBucket } from "../cloud/package";
import { getRates, setRates, updateCloudSettings } from "../cloud/cloud-settings";
import { getSetting } from "../settings-store";
import { submitCloudJob } from "../cloud/submit";
import { ApiError } from "../errors";
import { applyEffects } from "../jobs/lifecycle/effects";
import { cancelJob } from "../jobs/lifecycle/cancel";
import { principalOf } from "../middleware/authorize";
import { createRouter } from "../router";
import { schedulerOf } from "../jobs/objects";
import { effectsOf } from "./effects-context";
import { budgetedSubmitter } from "./budget-gate";
import { error, json, jsonBody } from "./openapi";

/** Cloud training (README "Cloud training"): submit, follow and cancel cloud jobs; the Cloud tab's settings and the hardware rates. */
export const cloudRoutes = createRouter();

const tags = ["Cloud"];
const errors = {
  401: error("No valid credential"),
  403: error("Not allowed (level, someone else's job, or uploads disabled)"),
  404: error("No such job, environment or provider"),
  409: error("Refused as things stand (consent, spending limit, provider not configured, job state)"),
  422: error("Invalid body"),
};

cloudRoutes.openapi(
  createRoute({
    method: "post",
    path: "/api/cloud/jobs/submit",
    tags,
    summary: "Submit an environment to a cloud provider (summary, estimate and consent first)",
    description: `Packages the environment's \`type: local\` datasets (from the datasets storage) into a zip without \`.env\`, \`.git\`, credentials or key files, and answers the summary (datasets, files, bytes, excluded files) and the cost estimate (hardware rate x expected run time) before anything is uploaded. With \`dry_run: true\` that is all: nothing is stored.

Then, in this order, a submission is refused with nothing stored when: the consent setting is Never Upload (403 \`cloud_uploads_disabled\`); the provider has no \`training_model\` or no \`training_destination\` (409 \`provider_not_configured\`: a fine-tune is never pushed into the trainer model itself); the destination is \`hub\` or \`s3\` (422 \`destination_unavailable\`: a cloud job gets only credentials scoped to its destination and ending with it, which only the storage destination has); the environment sets \`--post_checkpoint_script\`, \`--post_upload_script\` or \`--validation_external_script\` whose program the cloud settings' \`allowed_scripts\` do not list (422 \`script_not_allowed\`, naming the option); \`max_runtime_minutes\` is below the environment's \`--max_runtime_minutes\` (else the default run time) and you are not an admin (422 \`runtime_below_environment\`: the estimate, the approval rule and the spending limit use the run time the job may really take); the archive is over 100 MiB (413 \`archive_too_large\`); the storage endpoint is off or unreachable (422 \`destination_unavailable\`); the estimate would pass the spending limit of the period, counting finished jobs' costs and running jobs' estimates (409 \`spending_limit_exceeded\`); the consent setting is Always Ask and \`confirm_summary\` is not the \`summary_id\` of the summary as it is now (409 \`consent_required\`, or \`summary_changed\`); the provider says the API token's account is not the owner of \`training_destination\` (409 \`destination_not_owned\`; not checked when the provider cannot be asked).

The training gets the trainer's input contract (README "Cloud training"): \`config\` and \`dataloader\` (JSON strings), \`dataset_archive\` (a Cog \`Path\`), the storage destination's \`result_s3_*\` strings and its per-job keys as the Cog \`Secret\` inputs \`result_s3_access_key_id\` and \`result_s3_secret_access_key\`; nothing else secret. Webhooks are asked for only when the public URL is \`https://\`; with an \`http://\` one the job is followed by polling alone (the answer's message says so).

An accepted job is \`blocked\` when its estimate reaches the approval threshold (GET /api/queue/approval-rules), else it waits in the cloud pool (\`pending\`) under the global, per-user and team limits and the spending limit, and is packaged, uploaded and sent to the provider only when admitted (\`running\`): no money is spent before. Provider \`workers\` queues the environment for your own remote workers (nothing uploaded or billed); \`managed\` is coming soon (422).`,
    request: jsonBody(CloudSubmit),
    responses: {
      200: json(CloudSubmitAnswer, "The summary and estimate; the job when not a dry run"),
      402: error("A budget of yours or your team's is used up (`budget_exceeded`)"),
      413: error("Archive over 100 MiB"),
      ...errors,
    },
  }),
  async (c) => {
    const body = c.req.valid("json");
    const { submitter, budget } = await budgetedSubmitter(c, body.dry_run);
    const submitted = await submitCloudJob(
      {
        env: c.env,
        db: c.get("db"),
        log: c.get("log"),
        bucket: c.env.STORAGE as unknown as PackageBucket,
        config: c.get("config"),
        scheduler: schedulerOf(c.env),
      },
      submitter,
      body,
    );
    const answer = budget === null ? submitted : { ...submitted, budget };
    if (answer.job_id)
      auditLater(c, {
        event_type: "cloud_job_submitted",
        target: answer.job_id,
        details: {
          provider: body.provider,
          estimated_cost: answer.estimate.estimated_cost_usd,
          summary_id: answer.summary.summary_id,
          files: answer.summary.files,
        },
      });
    return c.json(answer, 200);
  },
);

cloudRoutes.openapi(
  createRoute({
    method: "get",
    path: "/api/cloud/jobs/{job_id}",
    tags,
    summary: "A cloud job: status at the provider, upload progress and cost so far",
    description:
      "`upload_progress` is the share of the archive uploaded to the provider (0 to 1). `cost_usd` is billed seconds times the hardware rate: while the job runs it is computed at each read (it grows each second); once the job ended it is the provider's final billed time. For the job's owner, leads and admins.",
    request: { params: JobIdParam },
    responses: { 200: json(CloudJob, "The job"), ...errors },
  }),
  async (c) => {
    const { job_id } = c.req.valid("param");
    return c.json(await readCloudJob(c.get("db"), job_id, ownerScope(principalOf(c).user)), 200);
  },
);

cloudRoutes.openapi(
  createRoute({
    method: "post",
    path: "/api/cloud/jobs/{job_id}/cancel",
    tags,
    summary: "Cancel a cloud job, waiting or running (a running one is billed the time used)",
    description:
      "A waiting job is cancelled before anything is uploaded. A running one is cancelled at its provider, which bills the seconds it ran; `cost_usd` becomes final when the provider confirms. Researchers cancel their own jobs, leads and admins any. 409 when the job already ended.",
    request: { params: JobIdParam },
    responses: { 200: json(CloudJob, "Cancelled"), ...errors },
  }),
  async (c) => {
    const { job_id } = c.req.valid("param");
    const { user } = principalOf(c);
    const db = c.get("db");
    await readCloudJob(db, job_id, ownerScope(user));
    await applyEffects(
      effectsOf(c, "cloud cancel"),
      await cancelJob(db, job_id, { ownerId: ownerScope(user), actorId: user.id, running: true }),
    );
    return c.json(await readCloudJob(db, job_id, ownerScope(user)), 200);
  },
);

cloudRoutes.openapi(
  createRoute({
    method: "post",
    path: "/api/cloud/jobs/{job_id}/resume",
    tags,
    summary: "Resuming a cloud run is not supported: always refused, with what to do instead",
    description:
      "An interrupted, failed or cancelled cloud run cannot be resumed at the provider; submit the environment again (POST /api/cloud/jobs/submit), which starts from the beginning. Answers 409 `resume_unsupported` (404 for an unknown job).",
    request: { params: JobIdParam },
    responses: { ...errors },
  }),
  async (c) => {
    const { job_id } = c.req.valid("param");
    const job = await readCloudJob(c.get("db"), job_id, ownerScope(principalOf(c).user));
    throw new ApiError(
      409,
      "resume_unsupported",
      `Cloud runs cannot be resumed (job ${job_id} is ${job.status}): submit its environment again with POST /api/cloud/jobs/submit; it starts from the beginning`,
    );
  },
);

cloudRoutes.openapi(
  createRoute({
    method: "get",
    path: "/api/cloud/settings",
    tags,
    summary: "The Cloud tab: consent, spending limit, public URL, polling and publishing",
    description:
      "What cloud submissions are held to: `consent_mode`, the spending limit and its period, the public URL providers and cloud jobs reach, how often jobs are polled, the default run time of estimates, and the publishing destinations. Secrets are named, never shown.",
    responses: { 200: json(CloudSettings, "Settings"), 401: errors[401] },
  }),
  async (c) => c.json(await getSetting(c.get("db"), "cloud"), 200),
);

cloudRoutes.openapi(
  createRoute({
    method: "put",
    path: "/api/cloud/settings",
    tags,
    summary: "Change the cloud settings (admin); saved at once",
    description:
      "Any subset; `publishing.hub` and `publishing.s3` fields one by one. `consent_mode`: `ask` (each submission confirms its summary), `allow`, `never` (cloud training refused). `spending_limit_usd` per `spending_period` (null: none). `allowed_scripts`: the programs (absolute paths in the trainer's image, `*` a wildcard, or bare names) a cloud job's script options may run; the list replaces the one before.",
    request: jsonBody(CloudSettingsUpdate),
    responses: { 200: json(CloudSettings, "The settings now in force"), 401: errors[401], 403: errors[403], 422: errors[422] },
  }),
  async (c) => {
    const { before, after } = await updateCloudSettings(c.get("db"), c.req.valid("json"));
    auditLater(c, { event_type: "cloud_settings_changed", target: "cloud", details: { changed: changedFields(before, after) } });
    await schedulerOf(c.env).pass("cloud settings changed");
    return c.json(after, 200);
  },
);

cloudRoutes.openapi(
  createRoute({
    method: "get",
    path: "/api/cloud/rates",
    tags,
    summary: "USD per second of each hardware type (what cost estimates and costs use)",
    description:
      "Hardware names (the provider setting `hardware`) to USD per second of billed time. Defaults: Replicate's published prices.",
    responses: { 200: json(HardwareRates, "Rates"), 401: errors[401] },
  }),
  async (c) => c.json(await getRates(c.get("db")), 200),
);

cloudRoutes.openapi(
  createRoute({
    method: "put",
    path: "/api/cloud/rates",
    tags,
    summary: "Replace the rates table (admin)",
    description: "The whole table: hardware names to USD per second. Jobs keep the rate they were submitted with.",
    request: jsonBody(HardwareRates),
    responses: { 200: json(HardwareRates, "Saved"), 401: errors[401], 403: errors[403], 422: errors[422] },
  }),
  async (c) => {
    const db = c.get("db");
    const before = await getRates(db);
    const after = await setRates(db, c.req.valid("json"));
    auditLater(c, { event_type: "cloud_rates_changed", target: "cloud_rates", details: { changed: changedFields(before, after) } });
    return c.json(after, 200);
  },
);
