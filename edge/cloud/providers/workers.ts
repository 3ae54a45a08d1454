import type { Database } from "../../db/client";
import type { CloudProvider, CredentialCheck, ProviderJob, ProviderStatus, RunSpec } from "../types";
import { ProviderError } from "../types";

/*
 * Worker orchestration: "cloud" jobs that run on this service's own GPU workers. A
 * submission to it becomes a worker-targeted job of the ordinary queue (edge/cloud/submit.ts), so
 * there is nothing to upload and nothing billed; this client reads those jobs back in the
 * provider interface's terms, for the provider listing and health.
 */

const STATUS: Record<string, ProviderStatus> = {
  pending: "starting",
  blocked: "starting",
  running: "processing",
  completed: "succeeded",
  failed: "failed",
  cancelled: "canceled",
};

function jobOf(row: Record<string, unknown>, logs = ""): ProviderJob {
  return {
    id: String(row.job_id),
    status: STATUS[String(row.status)] ?? "starting",
    logs,
    billed_seconds: null,
    created_at: (row.queued_at as string | null) ?? null,
    started_at: (row.started_at as string | null) ?? null,
    completed_at: (row.completed_at as string | null) ?? null,
    output: null,
    error: (row.error_message as string | null) ?? null,
  };
}

export class WorkersProvider implements CloudProvider {
  readonly provider_name = "workers";
  readonly supports_cost_tracking = false;
  readonly supports_live_logs = true;

  constructor(private readonly db: Database) {}

  /** Valid when at least one remote worker is registered and not offline: there is somewhere to run. */
  async validate_credentials(): Promise<CredentialCheck> {
    const started = performance.now();
    const result = await this.db.$client.execute("SELECT count(*) AS n FROM workers WHERE role != 'local' AND status != 'offline'");
    const n = Number(result.rows[0]?.n ?? 0);
    const latency_ms = Math.round((performance.now() - started) * 100) / 100;
    return n > 0
      ? { valid: true, message: `${n} worker(s) online`, latency_ms }
      : { valid: false, message: "no remote worker is online (POST /api/admin/workers, then start a runner)", latency_ms };
  }

  async list_jobs(limit = 50): Promise<ProviderJob[]> {
    const result = await this.db.$client.execute({
      sql: "SELECT * FROM queue_entries WHERE target = 'worker' ORDER BY id DESC LIMIT ?",
      args: [Math.max(1, Math.min(limit, 500))],
    });
    return result.rows.map((r) => jobOf(r as Record<string, unknown>));
  }

  run_job(_spec: RunSpec): Promise<ProviderJob> {
    // Worker jobs enter the queue through POST /api/cloud/jobs/submit like every other job; the Scheduler dispatches them.
    return Promise.reject(new ProviderError("worker jobs are submitted through the queue, not run directly", 409, false));
  }

  async cancel_job(job_id: string): Promise<ProviderJob> {
    throw new ProviderError(`cancel worker job ${job_id} with POST /api/cloud/jobs/${job_id}/cancel`, 409, false);
  }

  async get_job_logs(job_id: string): Promise<string> {
    const result = await this.db.$client.execute({
      sql: "SELECT payload FROM job_events WHERE job_id = ? AND type = 'log' ORDER BY idx LIMIT 10000",
      args: [job_id],
    });
    return result.rows.map((r) => String((JSON.parse(String(r.payload)) as { message?: unknown }).message ?? "")).join("\n");
  }

  async get_job_status(job_id: string): Promise<ProviderJob> {
    const result = await this.db.$client.execute({
      sql: "SELECT * FROM queue_entries WHERE job_id = ? AND target = 'worker'",
      args: [job_id],
    });
    const row = result.rows[0];
    if (!row) throw new ProviderError(`no worker job ${job_id}`, 404, false);
    return jobOf(row as Record<string, unknown>);
  }
}
