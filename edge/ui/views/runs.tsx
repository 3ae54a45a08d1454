import { useState } from "preact/hooks";
import { call, endpoints } from "../api";
import { ErrorNote } from "../components/error-note";
import { Field } from "../components/field";
import { Page, Panel } from "../components/page";
import { useLoad } from "../components/use-load";
import { navigate, replaceQuery, route } from "../router";
import type { ViewProps } from "../view-props";
import { MAX_COMPARED } from "./compare-data";
import { compareHref, RunsTable } from "./runs-table";
import "./compare.css";

const STATUSES = ["running", "completed", "failed", "cancelled"] as const;
type Status = (typeof STATUSES)[number];

/** Runs: the started jobs the caller may read; pick some and compare them. Filters kept in the address. */
export function RunsView(_props: ViewProps) {
  const query = route.value.query;
  const environment = query.get("environment") ?? "";
  const statusParam = query.get("status") ?? "";
  const status = (STATUSES as readonly string[]).includes(statusParam) ? (statusParam as Status) : undefined;
  const runs = useLoad(
    () => call(endpoints.runList, { query: { ...(environment ? { environment } : {}), ...(status ? { status } : {}), limit: 200 } }),
    [environment, status],
  );
  const [selected, setSelected] = useState<string[]>([]);
  const toggle = (jobId: string, on: boolean) => setSelected((s) => (on ? [...s, jobId] : s.filter((j) => j !== jobId)));
  const tooMany = selected.length > MAX_COMPARED;
  return (
    <Page title="Runs">
      <p>
        Jobs that started, with what their trainer reported. Tick two or more and compare their loss, learning rate, options and images.
      </p>
      <form
        class="row"
        onSubmit={(event) => {
          event.preventDefault();
          const data = new FormData(event.currentTarget);
          replaceQuery({ environment: String(data.get("environment") ?? "").trim(), status: String(data.get("status") ?? "") });
        }}
      >
        <Field label="Environment">
          <input name="environment" defaultValue={environment} maxLength={200} autoComplete="off" />
        </Field>
        <Field label="Status">
          <select name="status" defaultValue={status ?? ""}>
            <option value="">any</option>
            {STATUSES.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </Field>
        <button type="submit">Filter</button>
      </form>
      <Panel title="Runs you can read">
        <ErrorNote error={runs.error} />
        <div class="row">
          <button type="button" class="primary" disabled={selected.length < 1 || tooMany} onClick={() => navigate(compareHref(selected))}>
            Compare {selected.length ? `${selected.length} ` : ""}
            {selected.length === 1 ? "run" : "runs"}
          </button>
          {tooMany ? (
            <p class="error" role="alert">
              At most {MAX_COMPARED} runs can be compared at once; {selected.length} are ticked.
            </p>
          ) : null}
        </div>
        {runs.data ? (
          runs.data.runs.length ? (
            <RunsTable runs={runs.data.runs} selected={selected} onToggle={toggle} caption="Newest first" />
          ) : (
            <p>No runs{environment ? ` of ${environment}` : ""} yet.</p>
          )
        ) : null}
      </Panel>
    </Page>
  );
}
