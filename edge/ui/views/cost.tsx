import type { CostReport } from "../../../shared/schemas/spend";
import { call, endpoints } from "../api";
import { ErrorNote } from "../components/error-note";
import { Field } from "../components/field";
import { Page, Panel } from "../components/page";
import { useLoad } from "../components/use-load";
import { replaceQuery, route } from "../router";
import { can } from "../session";
import type { ViewProps } from "../view-props";
import { SpendSettings } from "./cost-settings";

// The groupings GET /api/cost takes (shared/schemas/spend.ts COST_GROUPS: not imported, the dashboard carries no schemas).
const GROUPS: { value: CostReport["by"]; label: string }[] = [
  { value: "user", label: "User" },
  { value: "team", label: "Team" },
  { value: "environment", label: "Environment" },
  { value: "provider", label: "Provider" },
];
const PERIODS = [
  { value: "7d", label: "Last 7 days" },
  { value: "30d", label: "Last 30 days" },
  { value: "90d", label: "Last 90 days" },
  { value: "365d", label: "Last 365 days" },
];

const money = (usd: number, currency: string) =>
  `${currency === "USD" ? "$" : ""}${usd.toFixed(2)}${currency === "USD" ? "" : ` ${currency}`}`;

/** Cost: GPU-hours, cost and jobs grouped by user, team, environment or provider over a period; a CSV download of the same. */
export function CostView(_props: ViewProps) {
  const query = route.value.query;
  const byParam = query.get("by") ?? "";
  const by = GROUPS.find((g) => g.value === byParam)?.value ?? "user";
  const sinceParam = query.get("since") ?? "";
  const since = PERIODS.find((p) => p.value === sinceParam)?.value ?? "30d";
  const report = useLoad(() => call(endpoints.cost, { query: { by, since } }), [by, since]);
  const csvHref = `/api/cost?${new URLSearchParams({ by, since, format: "csv" })}`;
  const label = GROUPS.find((g) => g.value === by)!.label;
  return (
    <Page title="Cost">
      <p>
        What jobs cost, local and cloud together: GPU-hours on the service's own boxes at the admin's price per GPU-hour, cloud jobs at what
        their provider billed. A job counts in the period it ended in; a running one with its cost so far.
      </p>
      <form
        class="row"
        onSubmit={(event) => {
          event.preventDefault();
          const data = new FormData(event.currentTarget);
          replaceQuery({ by: String(data.get("by") ?? ""), since: String(data.get("since") ?? "") });
        }}
      >
        <Field label="Group by">
          <select name="by">
            {GROUPS.map((g) => (
              <option key={g.value} value={g.value} selected={g.value === by}>
                {g.label}
              </option>
            ))}
          </select>
        </Field>
        <Field label="Period">
          <select name="since">
            {PERIODS.map((p) => (
              <option key={p.value} value={p.value} selected={p.value === since}>
                {p.label}
              </option>
            ))}
          </select>
        </Field>
        <button type="submit">Show</button>
        <a href={csvHref} download={`cost-by-${by}.csv`}>
          Export CSV (download)
        </a>
      </form>
      <Panel title={`Cost by ${label.toLowerCase()}`}>
        <ErrorNote error={report.error} />
        {report.data ? (
          <>
            {report.data.scope === "own" ? <p>Your own jobs only.</p> : null}
            <table>
              <caption>
                {new Date(report.data.since).toLocaleDateString()} to {new Date(report.data.until).toLocaleDateString()}, largest cost first
              </caption>
              <thead>
                <tr>
                  <th scope="col">{label}</th>
                  <th scope="col">GPU-hours</th>
                  <th scope="col">Cost ({report.data.currency})</th>
                  <th scope="col">Jobs</th>
                </tr>
              </thead>
              <tbody>
                {report.data.groups.map((g) => (
                  <tr key={g.key}>
                    <th scope="row">{g.key}</th>
                    <td>{g.gpu_hours.toFixed(2)}</td>
                    <td>{money(g.cost, report.data!.currency)}</td>
                    <td>{g.jobs}</td>
                  </tr>
                ))}
              </tbody>
              <tfoot>
                <tr>
                  <th scope="row">Total</th>
                  <td>{report.data.total.gpu_hours.toFixed(2)}</td>
                  <td>{money(report.data.total.cost, report.data.currency)}</td>
                  <td>{report.data.total.jobs}</td>
                </tr>
              </tfoot>
            </table>
            {report.data.groups.length ? null : <p>No job ended in this period.</p>}
          </>
        ) : null}
      </Panel>
      {can("admin") ? <SpendSettings onSaved={report.reload} /> : null}
    </Page>
  );
}
