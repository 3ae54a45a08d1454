import type { Command } from "commander";
import { Option } from "commander";
import { endpoints } from "../../../shared/client/endpoints";
import { costCsv } from "../../../shared/cost-csv";
import { COST_GROUPS } from "../../../shared/schemas/spend";
import { cli } from "../context";
import { cell } from "../format-job";

const money = (usd: number) => `$${usd.toFixed(2)}`;

/** `jobs cost`: GPU-hours, cost and jobs grouped by user, team, environment or provider (GET /api/cost). */
export function addCost(program: Command): void {
  program
    .command("cost")
    .description("What jobs cost over a period, grouped: GPU-hours, cost and jobs, local and cloud together.")
    .addOption(new Option("--by <group>", "group by").choices(COST_GROUPS).default("user"))
    .option("--since <when>", "30d, 12h, 2w, 90m before now, or an ISO date", "30d")
    .option("--until <when>", "an ISO date or time (default now)")
    .option("--user <username>", "only this user's jobs (leads and admins; researchers see their own anyway)")
    .addHelpText(
      "after",
      "\n--format json prints the API's answer, --format csv its CSV (a header row, a row per group, a total row).\n\nExample:\n  $ jobs cost --by team --since 30d\n  $ jobs cost --by user --format csv > cost.csv",
    )
    .action(async (options: { by: string; since: string; until?: string; user?: string }, command: Command) => {
      const { out, client } = cli(command, true, true);
      const query = {
        by: options.by,
        since: options.since,
        ...(options.until ? { until: options.until } : {}),
        ...(options.user ? { user: options.user } : {}),
      };
      const report = await client.call(endpoints.cost, { query });
      if (out.json) return out.printJson(report);
      if (out.format === "csv") return out.write(costCsv(report));
      const rows = report.groups.map((g) => [cell(g.key), g.gpu_hours.toFixed(2), money(g.cost), String(g.jobs)]);
      rows.push(["TOTAL", report.total.gpu_hours.toFixed(2), money(report.total.cost), String(report.total.jobs)]);
      out.table([report.by.toUpperCase(), "GPU-HOURS", `COST (${report.currency})`, "JOBS"], rows);
      out.note(`${report.since} to ${report.until}${report.scope === "own" ? ", your jobs only" : ""}`);
    });
}
