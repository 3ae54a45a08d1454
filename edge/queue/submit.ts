import { adminOnlyOptionsIn } from "../../shared/admin-options";
import type { ApprovalRules, LocalSubmit } from "../../shared/schemas/queue";
import { ApiError, notFound } from "../errors";
import type { NewJob, Submitter } from "../scheduler/types";

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

/** An environment's configuration as a submission reads it. */
export interface EnvironmentConfig {
  config: Record<string, unknown>;
  dataloader: unknown[];
}

/**
 * A local submission made ready for the Scheduler: requirements from the environment's option
 * map (`environment`, null when there is no such environment), the approval rules applied, and
 * the configuration snapshotted for the job to run. 422 naming each admin-only option when the
 * submitter is not an admin, whoever wrote the environment.
 *
 * @example
 * const job = prepareLocalJob(user, body, { config: { "--num_processes": 1 }, dataloader: [] }, rules);
 */
export function prepareLocalJob(user: Submitter, body: LocalSubmit, environment: EnvironmentConfig | null, rules: ApprovalRules): NewJob {
  if (environment === null) throw notFound(`Environment ${body.config_name}`);
  const { config } = environment;
  const refused = user.level === "admin" ? [] : adminOnlyOptionsIn(config);
  if (refused.length) {
    throw new ApiError(
      422,
      "admin_only_option",
      `Environment ${JSON.stringify(body.config_name)} sets ${refused.join(", ")}, which only an admin may run; ask its owner to remove it or an admin to submit it`,
      refused.map((option) => ({ path: `environment.config.${option}`, message: "admin only" })),
    );
  }
  const { numProcesses, deviceIds } = gpuRequirements(config);
  const threshold = rules.local_gpu_threshold;
  return {
    jobId: `local-${crypto.randomUUID().replace(/-/g, "").slice(0, 12)}`,
    userId: user.id,
    teamId: user.team_id,
    priority: user.priority,
    configName: body.config_name,
    jobType: "local",
    numProcesses,
    target: body.target,
    workerLabels: body.worker_labels ?? null,
    deviceIds,
    anyGpu: body.any_gpu,
    estimatedCost: 0,
    metadata: body.metadata ?? null,
    approvalRule:
      threshold !== null && numProcesses > threshold ? `asks for ${numProcesses} GPUs; more than ${threshold} needs approval` : null,
    configSnapshot: config,
    dataloaderSnapshot: environment.dataloader,
  };
}
