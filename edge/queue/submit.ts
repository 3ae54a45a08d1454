import type { LocalSubmit } from "../../shared/schemas/queue";
import type { User } from "../../shared/schemas/users";
import type { Database } from "../db/client";
import { ApiError, notFound } from "../errors";
import type { NewJob } from "../scheduler/types";
import { getSetting } from "../settings";

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
  const deviceIds = parts.map((p) => p.trim()).filter(Boolean).map(Number);
  if (deviceIds.some((d) => !Number.isInteger(d) || d < 0)) {
    throw new ApiError(422, "invalid_environment", `--accelerate_visible_devices must list device indices like "0,1", not ${JSON.stringify(rawDevices)}`);
  }
  return { numProcesses, deviceIds };
}

async function environmentConfig(db: Database, name: string): Promise<Record<string, unknown>> {
  const found = await db.$client.execute({ sql: "SELECT config FROM environments WHERE name = ?", args: [name] });
  if (!found.rows.length) throw notFound(`Environment ${name}`);
  return JSON.parse(String(found.rows[0]!.config ?? "{}")) as Record<string, unknown>;
}

/** A local submission made ready for the Scheduler: requirements from the environment, approval rule applied. */
export async function prepareLocalJob(db: Database, user: User, body: LocalSubmit): Promise<NewJob> {
  const [config, rules] = await Promise.all([environmentConfig(db, body.config_name), getSetting(db, "approval_rules")]);
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
    approvalRule: threshold !== null && numProcesses > threshold ? `asks for ${numProcesses} GPUs; more than ${threshold} needs approval` : null,
  };
}
