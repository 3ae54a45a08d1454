import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ServiceClient } from "../../shared/client/client";
import { ServiceError } from "../../shared/client/client";
import { workerEndpoints } from "../../shared/client/endpoints-workers";
import { refusedForGood, type FinishBody } from "./edge-client";
import { refusalReport, shortenedReport } from "./report";

/*
 * The end reports this box owes the edge (POST /api/workers/jobs/{id}/finish), kept on disk
 * (<work dir>/reports.json) until the edge has taken them, so a runner restarted meanwhile still
 * says how each job ended.
 */

interface Report {
  jobId: string;
  body: FinishBody;
  /** How far it was shortened after refusals: 0 as made, 1 without its lines, 2 the refusal as its reason. */
  shortened: 0 | 1 | 2;
}

/**
 * The reports not yet delivered, in the order they were made.
 *
 * @example
 * const reports = new PendingReports(edge, workDir, log);
 * reports.load(); // what a previous run left
 * reports.add("job-1", { status: "completed", exit_code: 0 });
 * await reports.flush();
 */
export class PendingReports {
  private readonly reports: Report[] = [];
  /** The reports on their way to the edge now. */
  private readonly sending = new Map<Report, Promise<void>>();

  constructor(
    private readonly edge: ServiceClient,
    private readonly workDir: string,
    private readonly log: (line: string) => void,
  ) {}

  /** Takes in the reports a previous run of the runner kept, if any (not written again until the next change). */
  load(): void {
    this.reports.push(...readReports(this.file()));
  }

  /** Whether a report for this job waits to be delivered. */
  has(jobId: string): boolean {
    return this.reports.some((r) => r.jobId === jobId);
  }

  /** A job's end to tell the edge: kept on disk until delivered. */
  add(jobId: string, body: FinishBody): void {
    this.reports.push({ jobId, body, shortened: 0 });
    this.save();
  }

  /**
   * Sends the reports not yet accepted. One the edge answers 404 or 409 (already settled) is
   * dropped; one it refuses otherwise is never dropped silently: it goes again without its lines,
   * then as a failure naming the refusal, so the job always ends. A failure to reach the edge (or
   * 5xx, 408, 429) keeps it for the next tick.
   */
  async flush(): Promise<void> {
    // A job's end and the runner's tick both flush: a report already on its way is awaited, not
    // sent twice; the others go side by side (each job's report is independent of the others).
    await Promise.all(
      this.reports.map((report) => {
        let sending = this.sending.get(report);
        if (!sending) {
          sending = this.deliver(report).finally(() => this.sending.delete(report));
          this.sending.set(report, sending);
        }
        return sending;
      }),
    );
  }

  /** One report to the edge, shortened as its refusals say; dropped once taken (or settled), kept when the edge is away. */
  private async deliver(report: Report): Promise<void> {
    for (;;) {
      try {
        await this.edge.call(workerEndpoints.workerJobFinish, { params: { job_id: report.jobId }, body: report.body });
      } catch (error) {
        if (!(error instanceof ServiceError) || !refusedForGood(error.status)) return; // kept for the next tick
        if (error.status !== 404 && error.status !== 409 && report.shortened < 2) {
          const refusal = `${error.status} ${error.detail}`;
          this.log(`job ${report.jobId}: the edge refused its end report (${refusal}); sending a shorter one`);
          report.body = report.shortened === 0 ? shortenedReport(report.body, refusal) : refusalReport(refusal);
          report.shortened++;
          continue;
        }
        this.log(`job ${report.jobId}: the edge did not take the report (${error.detail})`);
      }
      break;
    }
    this.reports.splice(this.reports.indexOf(report), 1);
    this.save();
  }

  private file(): string {
    return join(this.workDir, "reports.json");
  }

  private save(): void {
    const file = this.file();
    mkdirSync(this.workDir, { recursive: true });
    writeFileSync(`${file}.tmp`, JSON.stringify(this.reports.map(({ jobId, body }) => ({ jobId, body }))));
    renameSync(`${file}.tmp`, file);
  }
}

/** The reports a previous run of the runner kept (reports.json), or none. */
function readReports(file: string): Report[] {
  try {
    const kept = JSON.parse(readFileSync(file, "utf8")) as { jobId: string; body: FinishBody }[];
    return kept.filter((r) => typeof r?.jobId === "string" && r.body).map((r) => ({ jobId: r.jobId, body: r.body, shortened: 0 }));
  } catch {
    return [];
  }
}
