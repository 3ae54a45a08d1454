import type { Client } from "@libsql/client/web";
import { LocalSubmit } from "../../shared/schemas/queue";
import type { SubmitOutcome } from "../jobs/job";
import { checkOptions, type OptionMap } from "../training/options";

/**
 * `npm start -- --env <name>`: once the service and its runner are up, validate that
 * environment and start training it, owned by the first admin. Problems are logged, field by
 * field, and nothing is started; the service keeps running either way.
 */
export async function startEnvironmentAtBoot(
  db: Client,
  submit: (user: { id: number; team_id: string | null; priority: number; level: "admin" }, body: LocalSubmit) => Promise<SubmitOutcome>,
  name: string,
  log: (level: "info" | "warning" | "error", line: string) => void,
): Promise<string | null> {
  const env = await db.execute({ sql: "SELECT config FROM environments WHERE name = ?", args: [name] });
  if (!env.rows.length) {
    log("error", `--env ${name}: there is no such environment (GET /api/configs/ lists them); nothing started`);
    return null;
  }
  const { problems } = checkOptions(JSON.parse(String(env.rows[0]!.config ?? "{}")) as OptionMap, false);
  if (problems.length) {
    for (const p of problems) log("error", `--env ${name}: ${p.field}: ${p.message}`);
    log("error", `--env ${name}: not valid, nothing started`);
    return null;
  }
  const admin = await db.execute(
    `SELECT u.id, u.team_id, l.priority FROM users u JOIN user_levels ul ON ul.user_id = u.id JOIN levels l ON l.name = ul.level
     WHERE ul.level = 'admin' AND u.disabled_at IS NULL ORDER BY u.id LIMIT 1`,
  );
  const owner = admin.rows[0];
  if (!owner) {
    log("warning", `--env ${name}: valid, but no admin exists yet to own the job; create the first admin and start again`);
    return null;
  }
  const outcome = await submit(
    {
      id: Number(owner.id),
      team_id: owner.team_id === null ? null : String(owner.team_id),
      priority: Number(owner.priority),
      level: "admin",
    },
    LocalSubmit.parse({ config_name: name, metadata: { source: "npm start --env" } }),
  );
  switch (outcome.status) {
    case "running":
      log("info", `--env ${name}: Configuration Valid; training started (job ${outcome.jobId})`);
      return outcome.jobId;
    case "queued":
      log(
        "info",
        `--env ${name}: Configuration Valid; queued at position ${outcome.position} (${outcome.message}) as job ${outcome.jobId}`,
      );
      return outcome.jobId;
    case "blocked":
      log("info", `--env ${name}: Configuration Valid; job ${outcome.jobId} awaits an admin's approval`);
      return outcome.jobId;
    default:
      log("error", `--env ${name}: not started: ${outcome.message}`);
      return null;
  }
}
