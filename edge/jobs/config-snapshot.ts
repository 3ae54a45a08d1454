import { maskSecrets } from "../../shared/secrets-mask";
import type { Database } from "../db/client";
import { notFound } from "../errors";

/**
 * The configuration a job runs: its environment's option map and dataloader as they were at
 * submit (the runner launches from this snapshot), secrets masked. A job submitted before
 * snapshots existed and already finished has none: `config` and `dataloader` are then null.
 *
 * @example
 * const { config } = await jobConfig(db, "local-3f9c2a1b04de");
 */
export async function jobConfig(db: Database, jobId: string) {
  const found = await db.$client.execute({
    sql: "SELECT job_id, config_name, config_snapshot, dataloader_snapshot FROM queue_entries WHERE job_id = ?",
    args: [jobId],
  });
  const row = found.rows[0];
  if (!row) throw notFound(`Job ${jobId}`);
  const parse = (v: unknown) => (v === null || v === undefined ? null : (JSON.parse(String(v)) as unknown));
  return {
    job_id: String(row.job_id),
    config_name: row.config_name === null ? null : String(row.config_name),
    config: maskSecrets(parse(row.config_snapshot) as Record<string, string | number | boolean | null> | null),
    dataloader: maskSecrets(parse(row.dataloader_snapshot) as Record<string, unknown>[] | null),
  };
}
