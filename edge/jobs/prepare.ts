import { adminOnlyOptionsIn } from "../../shared/admin-options";
import type { ApprovalRules, LocalSubmit } from "../../shared/schemas/queue";
import type { Database } from "../db/client";
import { ApiError, notFound } from "../errors";
import type { CloudRecord, NewJob, Submitter } from "./job";

/*
 * One preparation for every submission, local or cloud: the environment read and checked for the
 * submitter (only an admin may run an admin-only option, whoever wrote the environment), the
 * job's id, the approval rule that catches it, and the snapshot of what it runs. The Scheduler
 * then places the job, and the lifecycle stores it (edge/jobs/lifecycle/submit.ts).
 */

/** An environment's configuration as a submission reads it. */
export interface EnvironmentConfig {
  config: Record<string, unknown>;
  dataloader: unknown[];
}

/**
 * An environment's stored row (its config and dataloader columns, JSON) as a submission reads it.
 *
 * @example
 * environmentFrom({ config: '{"--num_processes":1}', dataloader: "[]" }); // { config: { "--num_processes": 1 }, dataloader: [] }
 */
export function environmentFrom(row: { config?: unknown; dataloader?: unknown }): EnvironmentConfig {
  return {
    config: JSON.parse(String(row.config ?? "{}")) as Record<string, unknown>,
    dataloader: JSON.parse(String(row.dataloader ?? "[]")) as unknown[],
  };
}

/**
 * The named environment's configuration, or null when there is none.
 *
 * @example
 * const environment = submittedEnvironment(user, "flux", await readEnvironment(db, "flux"));
 */
export async function readEnvironment(db: Database, name: string): Promise<EnvironmentConfig | null> {
  const result = await db.$client.execute({ sql: "SELECT config, dataloader FROM environments WHERE name = ?", args: [name] });
  const row = result.rows[0];
  return row ? environmentFrom(row as Record<string, unknown>) : null;
}

/**
 * The environment a submission runs, checked for its submitter: 404 when there is no such
 * environment, 422 admin_only_option naming each admin-only option when the submitter is not an
 * admin, whoever wrote the environment.
 *
 * @example
 * submittedEnvironment(user, "sdxl", { config: { "--num_processes": 1 }, dataloader: [] });
 */
export function submittedEnvironment(user: Submitter, name: string, environment: EnvironmentConfig | null): EnvironmentConfig {
  if (environment === null) throw notFound(`Environment ${name}`);
  const refused = user.level === "admin" ? [] : adminOnlyOptionsIn(environment.config);
  if (refused.length)
    throw new ApiError(
      422,
      "admin_only_option",
      `Environment ${JSON.stringify(name)} sets ${refused.join(", ")}, which only an admin may run; ask its owner to remove it or an admin to submit it`,
      refused.map((option) => ({ path: `environment.config.${option}`, message: "admin only" })),
    );
  return environment;
}

/** `--num_processes` and `--accelerate_visible_devices` of an environment's option map. */
export function gpuRequirements(config: Record<string, unknown>): { numProcesses: number; deviceIds: number[] | null } {
  const rawCount = config["--num_processes"];
  const numProcesses = rawCount === undefined || rawCount === null || rawCount === "" ? 1 : Number(rawCount);
  if (!Number.isInteger(numProcesses) || numProcesses < 0 || numProcesses > 64) {
    throw new ApiError(422, "invalid_environment", `--num_processes must be a whole number from 0 to 64, not ${JSON.stringify(rawCount)}`);
  }
  const rawDevices = config["--accelerate_visible_devices"];
  if (rawDevices === undefined || rawDevices === null || rawDevices === "") return { numProcesses, deviceIds: null };
  const parts = Array.isArray(rawDevices) ? rawDevices.map(String) : String(rawDevices).split(",");
  const deviceIds = parts
    .map((p) => p.trim())
    .filter(Boolean)
    .map(Number);
  if (deviceIds.some((d) => !Number.isInteger(d) || d < 0)) {
    throw new ApiError(
      422,
      "invalid_environment",
      `--accelerate_visible_devices must list device indices like "0,1", not ${JSON.stringify(rawDevices)}`,
    );
  }
  return { numProcesses, deviceIds };
}

/**
 * The approval rule that catches a new job, or null when it may run without approval: a local job
 * asking for more GPUs than `local_gpu_threshold`, a cloud job estimated at `cloud_cost_threshold`
 * or more.
 *
 * @example
 * approvalRule({ jobType: "local", numProcesses: 8, estimatedCost: 0 }, { local_gpu_threshold: 4, cloud_cost_threshold: null }); // "asks for 8 GPUs; ..."
 */
export function approvalRule(job: Pick<NewJob, "jobType" | "numProcesses" | "estimatedCost">, rules: ApprovalRules): string | null {
  if (job.jobType === "cloud") {
    const threshold = rules.cloud_cost_threshold;
    return threshold !== null && job.estimatedCost >= threshold
      ? `estimated at $${job.estimatedCost.toFixed(2)}; $${threshold.toFixed(2)} or more needs approval`
      : null;
  }
  const threshold = rules.local_gpu_threshold;
  return threshold !== null && job.numProcesses > threshold
    ? `asks for ${job.numProcesses} GPUs; more than ${threshold} needs approval`
    : null;
}

/** What every new job carries, whatever runs it: its id, its submitter, and the snapshot of its environment. */
function newJob(
  user: Submitter,
  name: string,
  metadata: Record<string, unknown> | null | undefined,
  environment: EnvironmentConfig,
  job: Omit<
    NewJob,
    "jobId" | "userId" | "teamId" | "priority" | "configName" | "metadata" | "approvalRule" | "configSnapshot" | "dataloaderSnapshot"
  >,
  rules: ApprovalRules,
): NewJob {
  return {
    jobId: `${job.jobType}-${crypto.randomUUID().replace(/-/g, "").slice(0, 12)}`,
    userId: user.id,
    teamId: user.team_id,
    priority: user.priority,
    configName: name,
    metadata: metadata ?? null,
    approvalRule: user.budget_approval ?? approvalRule(job, rules),
    configSnapshot: environment.config,
    dataloaderSnapshot: environment.dataloader,
    ...job,
  };
}

/**
 * A local submission made ready for the Scheduler: requirements from the environment's option
 * map (`environment`, null when there is no such environment, refused as submittedEnvironment
 * refuses), the approval rules applied, and the configuration snapshotted for the job to run.
 *
 * @example
 * const job = prepareLocalJob(user, body, { config: { "--num_processes": 1 }, dataloader: [] }, rules);
 */
export function prepareLocalJob(user: Submitter, body: LocalSubmit, environment: EnvironmentConfig | null, rules: ApprovalRules): NewJob {
  const checked = submittedEnvironment(user, body.config_name, environment);
  const { numProcesses, deviceIds } = gpuRequirements(checked.config);
  const placement = {
    jobType: "local",
    numProcesses,
    target: body.target,
    workerLabels: body.worker_labels ?? null,
    deviceIds,
    anyGpu: body.any_gpu,
    estimatedCost: 0,
  } as const;
  return newJob(user, body.config_name, body.metadata, checked, placement, rules);
}

/**
 * A cloud submission made ready for the Scheduler, once its checks passed
 * (edge/cloud/submit.ts): it waits in the cloud pool, and its cloud record is stored with it.
 * `environment` is the one submittedEnvironment returned.
 *
 * @example
 * const job = prepareCloudJob(user, { configName: "flux", metadata: null, estimatedCost: 5.04, cloud }, environment, rules);
 */
export function prepareCloudJob(
  user: Submitter,
  submission: { configName: string; metadata?: Record<string, unknown> | null; estimatedCost: number; cloud: CloudRecord },
  environment: EnvironmentConfig,
  rules: ApprovalRules,
): NewJob {
  const { cloud } = submission;
  const placement = {
    jobType: "cloud",
    numProcesses: 0,
    target: "auto",
    workerLabels: null,
    deviceIds: null,
    anyGpu: false,
    estimatedCost: submission.estimatedCost,
    provider: cloud.provider,
    cloudSeconds: cloud.expectedSeconds,
    cloud,
  } as const;
  return newJob(user, submission.configName, submission.metadata, environment, placement, rules);
}
