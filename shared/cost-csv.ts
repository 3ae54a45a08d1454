import type { CostReport } from "./schemas/spend";

/*
 * A cost report as CSV (RFC 4180, CRLF lines, a header row): what GET /api/cost?format=csv answers
 * and `jobs cost --format csv` prints, written once.
 */

/** A field quoted when it must be, and a leading =, +, - or @ defused so a spreadsheet reads text, not a formula. */
function field(value: string | number): string {
  let text = String(value);
  if (typeof value === "string" && /^[=+\-@\t\r]/.test(text)) text = `'${text}`;
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

/**
 * The report's groups, one row each, then a `total` row.
 *
 * @example
 * costCsv(report); // "user,gpu_hours,cost,currency,jobs\r\nada,2,4,USD,1\r\ntotal,2,4,USD,1\r\n"
 */
export function costCsv(report: CostReport): string {
  const rows: (string | number)[][] = [[report.by, "gpu_hours", "cost", "currency", "jobs"]];
  for (const g of report.groups) rows.push([g.key, g.gpu_hours, g.cost, report.currency, g.jobs]);
  rows.push(["total", report.total.gpu_hours, report.total.cost, report.currency, report.total.jobs]);
  return rows.map((r) => r.map(field).join(",") + "\r\n").join("");
}
