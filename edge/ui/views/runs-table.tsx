import type { z } from "zod";
import type { Run } from "../../../shared/schemas/runs";
import { formatDuration, formatTime } from "../components/format";
import { href } from "../router";
import { MAX_COMPARED } from "./compare-data";

export type RunRow = z.output<typeof Run>;

const loss = (value: number | null) => (value === null ? "-" : String(Number(value.toPrecision(4))));

/**
 * Runs as a table: job (a link to its page), environment, owner, status, start, duration, last
 * step and final loss; with `selected`, a checkbox per run.
 */
export function RunsTable({
  runs,
  selected,
  onToggle,
  caption,
}: {
  runs: RunRow[];
  selected?: string[];
  onToggle?: (jobId: string, on: boolean) => void;
  caption: string;
}) {
  return (
    <div class="table-wrap">
      <table class="runs-table">
        <caption>{caption}</caption>
        <thead>
          <tr>
            {selected ? <th scope="col">Compare</th> : null}
            <th scope="col">Job</th>
            <th scope="col">Environment</th>
            <th scope="col">Owner</th>
            <th scope="col">Status</th>
            <th scope="col">Started</th>
            <th scope="col">Duration</th>
            <th scope="col">Last step</th>
            <th scope="col">Final loss</th>
          </tr>
        </thead>
        <tbody>
          {runs.map((run) => (
            <tr key={run.job_id}>
              {selected ? (
                <td>
                  <input
                    type="checkbox"
                    aria-label={`Compare ${run.job_id}`}
                    checked={selected.includes(run.job_id)}
                    onChange={(event) => onToggle?.(run.job_id, event.currentTarget.checked)}
                  />
                </td>
              ) : null}
              <th scope="row">
                <a href={href("jobs", run.job_id)}>{run.job_id}</a>
              </th>
              <td>{run.environment ?? "-"}</td>
              <td>{run.username ?? "-"}</td>
              <td>
                <span class={`badge status-${run.status}`}>{run.status}</span>
              </td>
              <td>{formatTime(run.started_at)}</td>
              <td>{formatDuration(run.duration_seconds)}</td>
              <td>{run.final_step ?? "-"}</td>
              <td>{loss(run.final_loss)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** The compare page's address for these runs (the first MAX_COMPARED). */
export const compareHref = (jobIds: string[]) => href("compare", { jobs: jobIds.slice(0, MAX_COMPARED).join(",") });
