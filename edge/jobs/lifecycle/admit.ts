import type { InStatement } from "@libsql/client/web";
import type { ExpectedEnd } from "../estimate";
import type { Admission } from "../job";
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
 * Starts the admitted jobs, each only if it is still pending and none of its GPUs is quarantined
 * (a heartbeat can quarantine one after the pass read the capacity; the job then stays pending,
 * and the Scheduler reads it again by its periodic re-read): one UPDATE for all of them (the
 * admissions travel as one JSON argument), then one statement per remote worker taken. One
 * statement rather than one per job: a 500-job pass is otherwise 500 round trips' worth of work
 * in the batch. RETURNING names the jobs that really started, and only those are reported.
 * `ends`: each job's expected end from its start (edge/jobs/estimate.ts endAtStart), by
 * stored id; a job without one starts with none.
 *
 * @example
 * const [admitted] = await writeBatch(db, [admitJobs(plan.admitted, capacity.localWorkerId, now.toISOString(), ends)]);
 */
export function admitJobs(
  admissions: Admission[],
  localWorkerId: number | null,
  stamp: string,
  ends: ReadonlyMap<number, ExpectedEnd> = new Map(),
): BatchPart<Admitted> {
  if (admissions.length === 0) return { statements: [], read: () => ({ started: new Set(), change: { jobs: [] } }) };
  const rows = admissions.map((a) => {
    const end = ends.get(a.id);
    return {
      id: a.id,
      gpus: a.gpus,
      worker: assignedWorker(a, localWorkerId),
      end: end ? new Date(end.at).toISOString() : null,
      method: end?.method ?? null,
    };
  });
  const statements: InStatement[] = [
    {
      // The admissions are materialised first so SQLite looks each job up by id; joined directly,
      // it walks the status index over every pending entry per admission (seconds at 10,000).
      sql: `WITH a AS MATERIALIZED (
              SELECT value ->> '$.id' AS id, value ->> '$.worker' AS worker, value ->> '$.end' AS end_at, value ->> '$.method' AS method,
                     CASE json_type(value, '$.gpus') WHEN 'array' THEN value -> '$.gpus' END AS gpus
              FROM json_each(?2))
            UPDATE queue_entries SET status = 'running', started_at = ?1, updated_at = ?1, allocated_gpus = a.gpus, worker_id = a.worker,
              expected_end_at = a.end_at, expected_end_method = a.method, progress_rate = NULL
            FROM a WHERE queue_entries.id = a.id AND queue_entries.status = 'pending'
              AND NOT EXISTS (SELECT 1 FROM json_each(a.gpus) g JOIN gpu_quarantines q
                              ON q.worker_id = a.worker AND q.gpu_index = g.value AND q.cleared_at IS NULL)
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
