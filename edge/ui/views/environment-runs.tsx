import { call, endpoints } from "../api";
import { ErrorNote } from "../components/error-note";
import { useLoad } from "../components/use-load";
import { MAX_COMPARED } from "./compare-data";
import { compareHref, RunsTable } from "./runs-table";

/**
 * The runs of one environment (newest first) with their final loss and duration, and links to
 * compare them: for an environment's page to mount (`<EnvironmentRuns name="demo" />`).
 */
export function EnvironmentRuns({ name }: { name: string }) {
  const runs = useLoad(() => call(endpoints.runList, { query: { environment: name } }), [name]);
  const list = runs.data?.runs ?? [];
  return (
    <section class="environment-runs" aria-label={`Runs of ${name}`}>
      <ErrorNote error={runs.error} />
      {runs.data && !list.length ? <p>No runs of {name} yet.</p> : null}
      {list.length ? (
        <>
          <RunsTable runs={list} caption={`Runs of ${name} you can read, newest first`} />
          {list.length > 1 ? (
            <p>
              <a href={compareHref(list.map((r) => r.job_id))}>
                Compare the {Math.min(list.length, MAX_COMPARED)} newest runs of {name}
              </a>
            </p>
          ) : null}
        </>
      ) : null}
    </section>
  );
}
