import type { InStatement } from "@libsql/client/web";
import type { Admission } from "../../scheduler/plan";
import type { BatchPart } from "./batch";
import type { Change } from "./effects";

/*
 * Admit: pending -> running with the GPUs or worker a Scheduler pass gave the job. Only the
 * Scheduler calls it, inside a pass, since only it hands out capacity.
 */

/** What an admission batch really did. */
export interface Admitted {
  /** Stored ids of the jobs that started; an admitted job cancelled meanwhile is not among them. */
  started: Set<number>;
  change: Change;
}

/**
 * The worker an admitted job is stored with: its remote worker, the local box for a local-box job
 * (GPUs, possibly none), or none for a cloud job.
 *
 * @example
 * assignedWorker({ id: 7, jobId: "j", gpus: [0], workerId: null }, 3); // 3
 */
export function assignedWorker(admission: Pick<Admission, "gpus" | "workerId">, localWorkerId: number | null): number | null {
  return admission.workerId ?? (admission.gpus !== null ? localWorkerId : null);
}

/**
 * Starts the admitted jobs, each only if it is still pending: one UPDATE for all of them (the
 * admissions travel as one JSON argument), then one statement per remote worker taken. One
 * statement rather than one per job: a 500-job pass is otherwise 500 round trips' worth of work
 * in the batch. RETURNING names the jobs that really started, and only those are reported.
 *
 * @example
 * const [admitted] = await writeBatch(db, [admitJobs(plan.admitted, capacity.localWorkerId, now.toISOString())]);
 */
export function admitJobs(admissions: Admission[], localWorkerId: number | null, stamp: string): BatchPart<Admitted> {
  if (admissions.length === 0) return { statements: [], read: () => ({ started: new Set(), change: { jobs: [] } }) };
  const rows = admissions.map((a) => ({ id: a.id, gpus: a.gpus, worker: assignedWorker(a, localWorkerId) }));
  const statements: InStatement[] = [
    {
      // The admissions are materialised first so SQLite looks each job up by id; joined directly,
      // it walks the status index over every pending entry per admission (seconds at 10,000).
      sql: `WITH a AS MATERIALIZED (
              SELECT value ->> '$.id' AS id, value ->> '$.worker' AS worker,
                     CASE json_type(value, '$.gpus') WHEN 'array' THEN value -> '$.gpus' END AS gpus
              FROM json_each(?2))
            UPDATE queue_entries SET status = 'running', started_at = ?1, updated_at = ?1, allocated_gpus = a.gpus, worker_id = a.worker
            FROM a WHERE queue_entries.id = a.id AND queue_entries.status = 'pending'
            RETURNING queue_entries.id AS admitted_id`,
      args: [stamp, JSON.stringify(rows)],
    },
  ];
  for (const a of admissions) if (a.workerId !== null) statements.push(workerBusyStatement(a.workerId, a.jobId));
  return {
    statements,
    read(results) {
      const started = new Set(Array.from(results[0]?.rows ?? [], (row) => Number(row.admitted_id)));
      const jobs = admissions
        .filter((a) => started.has(a.id))
        .map((a) => ({
          jobId: a.jobId,
          from: "pending" as const,
          to: "running" as const,
          workerId: assignedWorker(a, localWorkerId),
          // Neither GPUs on the local box nor a worker: a cloud job, whose provider is called now.
          ...(a.gpus === null && a.workerId === null ? { cloud: true } : {}),
        }));
      return { started, change: { jobs } };
    },
  };
}

/**
 * A remote worker becomes busy only if its job really started (after the job's own statement in
 * the same batch).
 */
export function workerBusyStatement(workerId: number, jobId: string): InStatement {
  return {
    sql: `UPDATE workers SET status = 'busy' WHERE id = ? AND status = 'IDLE'
          AND EXISTS (SELECT 1 FROM queue_entries WHERE job_id = ? AND status = 'running' AND worker_id = ?)`,
    args: [workerId, jobId, workerId],
  };
}
