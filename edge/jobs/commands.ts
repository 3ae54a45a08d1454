import type { Database } from "../db/client";
import { ApiError } from "../errors";
import { explainLostWrite } from "./lifecycle/lost-race";
import type { TrainerCommand } from "../../shared/trainer-commands";

/*
 * Commands for a running job's trainer. Stored, then delivered with the runner's next ask for
 * work until the runner acknowledges them; the trainer acts after its next step. (Cancel is not
 * a command: a cancelled job leaves the runner's assignments, and the runner ends its trainer.)
 */

export { TRAINER_COMMANDS, type TrainerCommand } from "../../shared/trainer-commands";

/**
 * Queues a command for a running job; returns the worker to wake. `requestedBy`: who asked (null:
 * the service itself). `ownerId`: only that user's job may take it (null: anyone's). One round
 * trip when it is taken: the job's owner and status are checked by the write itself. Refused, the
 * job is read to say why: 404, 403 not the caller's, or 409 when it is not running.
 */
export async function addCommand(
  db: Database,
  jobId: string,
  command: TrainerCommand,
  { requestedBy, ownerId }: { requestedBy: number | null; ownerId: number | null },
): Promise<{ id: number; workerId: number }> {
  const now = new Date().toISOString();
  const added = await db.$client.execute({
    sql: `INSERT INTO job_commands (job_id, worker_id, command, requested_by, created_at)
          SELECT job_id, worker_id, ?2, ?3, ?4 FROM queue_entries
          WHERE job_id = ?1 AND status = 'running' AND worker_id IS NOT NULL AND (?5 IS NULL OR user_id = ?5)
          RETURNING id, worker_id`,
    args: [jobId, command, requestedBy, now, ownerId],
  });
  const row = added.rows[0];
  if (row) return { id: Number(row.id), workerId: Number(row.worker_id) };
  const conflict = (status: string) =>
    new ApiError(409, "job_not_running", `Job ${jobId} is ${status}; only a running job's trainer takes commands`);
  return explainLostWrite(db, jobId, {
    ownerId,
    notOwner: "You can control only your own jobs; a lead or admin can control any",
    conflict,
  });
}

/** Commands not yet acknowledged for this worker's running jobs, oldest first. */
export async function openCommands(db: Database, workerId: number): Promise<{ id: number; job_id: string; command: TrainerCommand }[]> {
  const rows = await db.$client.execute({
    sql: `SELECT c.id, c.job_id, c.command FROM job_commands c JOIN queue_entries q ON q.job_id = c.job_id
          WHERE c.worker_id = ? AND c.acked_at IS NULL AND q.status = 'running' ORDER BY c.id`,
    args: [workerId],
  });
  return rows.rows.map((r) => ({ id: Number(r.id), job_id: String(r.job_id), command: String(r.command) as TrainerCommand }));
}

export async function ackCommands(db: Database, workerId: number, ids: number[]): Promise<void> {
  if (!ids.length) return;
  await db.$client.execute({
    sql: `UPDATE job_commands SET acked_at = ? WHERE worker_id = ? AND acked_at IS NULL AND id IN (SELECT value FROM json_each(?))`,
    args: [new Date().toISOString(), workerId, JSON.stringify(ids)],
  });
}
