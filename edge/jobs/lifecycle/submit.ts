import type { InStatement } from "@libsql/client/web";
import { endAtStart, type ExpectedEnd } from "../estimate";
import type { Admission } from "../job";
import type { CloudRecord, NewJob } from "../job";
import { assignedWorker, workerBusyStatement } from "./admit";
import type { BatchPart } from "./batch";
import type { Change } from "./effects";

/*
 * Submit: a new job is stored in the state the Scheduler's pass decided for it - running with its
 * GPUs or worker when it fits now, pending otherwise, blocked with its approval request when an
 * approval rule caught it. Only the Scheduler calls it, in the same batch as the pass's
 * admissions, so a submission can never be given capacity another job holds.
 */

/** A new job and where the pass put it. */
export type NewSubmission =
  | { job: NewJob; to: "pending" | "blocked" }
  | { job: NewJob; to: "running"; admission: Pick<Admission, "gpus" | "workerId" | "expectedEndAt"> };

/** What a submission batch stored, in the order the submissions were given. */
export interface Submitted {
  stored: { id: number; approvalId: number | null }[];
  change: Change;
}

/**
 * Inserts the submissions in order (their ids follow arrival): each with its approval request when
 * blocked, its remote worker marked busy when it starts on one, and a cloud job's record.
 *
 * @example
 * const [submitted] = await writeBatch(db, [submitJobs([{ job, to: "pending" }], localWorkerId, stamp)]);
 * submitted.stored[0].id; // the new entry's id
 */
export function submitJobs(submissions: NewSubmission[], localWorkerId: number | null, stamp: string): BatchPart<Submitted> {
  const statements: InStatement[] = [];
  // Where each submission's insert (and approval request) sits among the statements.
  const at: { insert: number; approval: number | null }[] = [];
  const jobs: Change["jobs"] = [];
  for (const s of submissions) {
    const running = s.to === "running" ? { gpus: s.admission.gpus, workerId: assignedWorker(s.admission, localWorkerId) } : null;
    at.push({ insert: statements.length, approval: s.to === "blocked" ? statements.length + 1 : null });
    // A job stored running starts now: its expected end as any admission's (admit.ts).
    const end = s.to === "running" ? startEnd(s.job, Date.parse(stamp), s.admission) : null;
    statements.push(insertStatement(s.job, s.to, stamp, running?.gpus ?? null, running?.workerId ?? null, end));
    if (s.to === "blocked") statements.push(...approvalStatements(s.job, stamp));
    if (s.to === "running" && s.admission.workerId !== null) statements.push(workerBusyStatement(s.admission.workerId, s.job.jobId));
    if (s.job.cloud) statements.push(cloudRecordStatement(s.job.jobId, s.job.cloud, stamp));
    jobs.push({
      jobId: s.job.jobId,
      from: null,
      to: s.to,
      workerId: running?.workerId ?? null,
      ...(s.job.jobType === "cloud" ? { cloud: true } : {}),
    });
  }
  return {
    statements,
    read(results) {
      const idAt = (index: number) => Number(results[index]!.rows[0]!.id);
      return {
        stored: at.map((a) => ({ id: idAt(a.insert), approvalId: a.approval === null ? null : idAt(a.approval) })),
        change: { jobs },
      };
    },
  };
}

function insertStatement(
  job: NewJob,
  status: NewSubmission["to"],
  stamp: string,
  gpus: number[] | null,
  workerId: number | null,
  end: ExpectedEnd | null,
): InStatement {
  return {
    sql: `INSERT INTO queue_entries (job_id, user_id, team_id, provider, config_name, priority, status, queued_at, started_at, estimated_cost,
            requires_approval, metadata, allocated_gpus, job_type, num_processes, target, worker_labels, device_ids, any_gpu, worker_id, updated_at,
            config_snapshot, dataloader_snapshot, expected_end_at, expected_end_method, retry_of, lineage_id, resume_from)
          VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
    args: [
      job.jobId,
      job.userId,
      job.teamId,
      job.provider ?? null,
      job.configName,
      job.priority,
      status,
      stamp,
      status === "running" ? stamp : null,
      job.estimatedCost,
      job.approvalRule !== null ? 1 : 0,
      job.metadata ? JSON.stringify(job.metadata) : null,
      gpus === null ? null : JSON.stringify(gpus),
      job.jobType,
      job.numProcesses,
      job.target,
      job.workerLabels ? JSON.stringify(job.workerLabels) : null,
      job.deviceIds ? JSON.stringify(job.deviceIds) : null,
      job.anyGpu ? 1 : 0,
      workerId,
      stamp,
      JSON.stringify(job.configSnapshot),
      JSON.stringify(job.dataloaderSnapshot),
      end === null ? null : new Date(end.at).toISOString(),
      end?.method ?? null,
      job.retry?.of ?? null,
      job.retry?.lineageId ?? null,
      job.retry ? JSON.stringify(job.retry.resumeFrom) : null,
    ],
  };
}

/**
 * A new job's expected end if it starts at `startedAt`: from its cloud run-time allowance or its
 * snapshot's --max_runtime_minutes, else the end its admission expected (edge/jobs/estimate.ts endAtStart).
 *
 * @example
 * startEnd(job, Date.now()); // { at: ..., method: "max_runtime" } | null
 */
export function startEnd(job: NewJob, startedAt: number, admission: Pick<Admission, "expectedEndAt"> = {}) {
  return endAtStart(
    { maxRuntime: job.configSnapshot["--max_runtime_minutes"], cloudSeconds: job.cloudSeconds ?? null },
    startedAt,
    admission,
  );
}

// A cloud job's record, in the same write batch as its entry: a job stored is never without one.
function cloudRecordStatement(jobId: string, cloud: CloudRecord, stamp: string): InStatement {
  return {
    sql: `INSERT INTO cloud_jobs (job_id, provider, hardware, rate_usd_per_second, expected_seconds, destination, summary, archive_bytes, created_at, updated_at)
          VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    args: [
      jobId,
      cloud.provider,
      cloud.hardware,
      cloud.ratePerSecond,
      cloud.expectedSeconds,
      JSON.stringify(cloud.destination),
      JSON.stringify(cloud.summary),
      cloud.archiveBytes,
      stamp,
      stamp,
    ],
  };
}

// The request row, then its id on the entry; in the same write batch as the insert.
function approvalStatements(job: NewJob, stamp: string): InStatement[] {
  return [
    {
      sql: `INSERT INTO approval_requests (entry_id, job_id, rule, status, requested_at)
            SELECT id, job_id, ?, 'pending', ? FROM queue_entries WHERE job_id = ? RETURNING id`,
      args: [job.approvalRule, stamp, job.jobId],
    },
    {
      sql: `UPDATE queue_entries SET approval_id = (SELECT max(id) FROM approval_requests WHERE job_id = ?1) WHERE job_id = ?1`,
      args: [job.jobId],
    },
  ];
}
