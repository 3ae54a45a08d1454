import { join } from "node:path";
import { createClient } from "@libsql/client";
import type { TestStack } from "./stack";

export { gpuInventory, registerBox } from "./boxes";

/*
 * Jobs of known GPU-seconds for the spend tests: a box registered with the GPUs given (./boxes.ts), its job
 * finished by the box's own token (the real flow), then the job's stored start and end rewritten
 * to a known duration (test-only, straight in the service's libSQL file: the flow stamps the wall
 * clock).
 */

/** The box reports `jobId` completed. */
export async function finishJob(t: TestStack, jobId: string, token: string): Promise<void> {
  const reply = await t.call("POST", `/api/workers/jobs/${jobId}/finish`, {
    json: { status: "completed", exit_code: 0 },
    auth: { bearer: token },
  });
  if (reply.status !== 200) throw new Error(`finish ${jobId}: ${reply.status} ${reply.text}`);
}

/** Test-only: a completed job's stored start and end, set `seconds` apart, ending an hour ago. */
export async function setStoredDuration(t: TestStack, jobId: string, seconds: number): Promise<void> {
  const db = createClient({ url: `file:${join(t.dataDir, "service.db")}` });
  try {
    const end = Date.now() - 3_600_000;
    const updated = await db.execute({
      sql: "UPDATE queue_entries SET started_at = ?, completed_at = ? WHERE job_id = ? AND status = 'completed'",
      args: [new Date(end - seconds * 1000).toISOString(), new Date(end).toISOString(), jobId],
    });
    if (updated.rowsAffected !== 1) throw new Error(`${jobId} is not a completed job`);
  } finally {
    db.close();
  }
}
