import { useState } from "preact/hooks";
import type { z } from "zod";
import type { AuditVerification } from "../../../shared/schemas/audit";
import { call, endpoints } from "../api";
import { ErrorNote } from "../components/error-note";
import { Field } from "../components/field";
import { formatTime } from "../components/format";
import { Page, Panel } from "../components/page";
import { PageSizeField, useCursorPages } from "../components/paging";
import { useAction, useLoad } from "../components/use-load";
import { replaceQuery, route } from "../router";
import type { ViewProps } from "../view-props";
import "./settings.css";

/** Event types worth offering in the filter; any other can be typed. */
const KNOWN_EVENTS = [
  "login_failed",
  "rate_limited",
  "webhook_rejected",
  "limits_changed",
  "approval_rules_changed",
  "cloud_settings_changed",
  "cloud_rates_changed",
  "provider_settings_changed",
  "metrics_config_changed",
];

const PAGE_SIZES = ["50", "100", "500"];

/** A datetime-local control's value as ISO 8601 (undefined when empty or unreadable). */
function isoOf(local: string | null): string | undefined {
  if (!local) return undefined;
  const date = new Date(local);
  return Number.isNaN(date.getTime()) ? undefined : date.toISOString();
}

/** The result of a chain check, said plainly: intact, or the first entry where it breaks. */
function Verification({ result }: { result: z.output<typeof AuditVerification> }) {
  if (result.valid)
    return (
      <p class="verify-result">
        The chain is intact: {result.entries_checked} {result.entries_checked === 1 ? "entry" : "entries"} checked.
        {result.last_hash ? (
          <span class="field-hint">
            {" "}
            Newest hash <code>{result.last_hash}</code> (keep a copy elsewhere to notice removed newest entries).
          </span>
        ) : null}
      </p>
    );
  return (
    <p class="verify-result broken">
      The chain is broken at entry #{result.first_invalid?.id ?? "?"}: {result.first_invalid?.reason ?? "unknown reason"} (
      {result.entries_checked} entries checked).
    </p>
  );
}

interface Filters {
  event_type?: string;
  since?: string;
  until?: string;
  limit: string;
}

/** The filters, kept in the location's query so a filtered view can be bookmarked. */
function FilterForm({ filters }: { filters: Filters }) {
  const [draft, setDraft] = useState(filters);
  const edit = (change: Partial<Filters>) => setDraft({ ...draft, ...change });
  return (
    <form
      class="row settings-form"
      aria-label="Filter the audit trail"
      onSubmit={(event) => {
        event.preventDefault();
        const value = (text: string | undefined) => text?.trim() || undefined;
        replaceQuery({ event_type: value(draft.event_type), since: value(draft.since), until: value(draft.until), limit: draft.limit });
      }}
    >
      <Field label="Event type">
        <input
          name="event_type"
          list="audit-event-types"
          value={draft.event_type ?? ""}
          autoComplete="off"
          onInput={(e) => edit({ event_type: e.currentTarget.value })}
        />
      </Field>
      <datalist id="audit-event-types">
        {KNOWN_EVENTS.map((name) => (
          <option key={name} value={name} />
        ))}
      </datalist>
      <Field label="From">
        <input name="since" type="datetime-local" value={draft.since ?? ""} onInput={(e) => edit({ since: e.currentTarget.value })} />
      </Field>
      <Field label="Until">
        <input name="until" type="datetime-local" value={draft.until ?? ""} onInput={(e) => edit({ until: e.currentTarget.value })} />
      </Field>
      <PageSizeField sizes={PAGE_SIZES} value={draft.limit} onChange={(limit) => edit({ limit })} />
      <button type="submit">Apply</button>
      <button type="button" onClick={() => replaceQuery({})}>
        Clear
      </button>
    </form>
  );
}

/** The audit trail (admin): filtered, paged back in time, with its hash chain verified on demand. */
export function AuditView(_props: ViewProps) {
  const query = route.value.query;
  const filters: Filters = {
    event_type: query.get("event_type") || undefined,
    since: query.get("since") || undefined,
    until: query.get("until") || undefined,
    limit: PAGE_SIZES.includes(query.get("limit") ?? "") ? query.get("limit")! : "50",
  };
  const filterKey = JSON.stringify(filters);
  const pages = useCursorPages(filterKey);
  const cursor = pages.cursor;
  const list = useLoad(
    () =>
      call(endpoints.auditList, {
        query: {
          event_type: filters.event_type,
          since: isoOf(filters.since ?? null),
          until: isoOf(filters.until ?? null),
          limit: Number(filters.limit),
          cursor,
        },
      }),
    [filterKey, cursor],
  );
  const [result, setResult] = useState<z.output<typeof AuditVerification> | null>(null);
  const verify = useAction(() => call(endpoints.auditVerify, {}), setResult);

  return (
    <Page
      title="Audit trail"
      actions={
        <button type="button" class="primary" onClick={() => void verify.run()} disabled={verify.busy}>
          Verify chain
        </button>
      }
    >
      <div aria-live="polite">
        {result ? <Verification result={result} /> : null}
        <ErrorNote error={verify.error} />
      </div>
      <Panel title="Filter" id="audit-filter">
        <FilterForm key={filterKey} filters={filters} />
      </Panel>
      <ErrorNote error={list.error} />
      {list.data ? (
        <>
          <div class="table-wrap">
            <table aria-busy={list.loading} aria-label="Audit entries, newest first">
              <thead>
                <tr>
                  <th scope="col">#</th>
                  <th scope="col">Time</th>
                  <th scope="col">Actor</th>
                  <th scope="col">Action</th>
                  <th scope="col">Target</th>
                  <th scope="col">Client</th>
                  <th scope="col">Details</th>
                </tr>
              </thead>
              <tbody>
                {list.data.entries.map((entry) => (
                  <tr key={entry.id}>
                    <td>{entry.id}</td>
                    <td>{formatTime(entry.occurred_at)}</td>
                    <td>{entry.actor ?? (entry.actor_user_id === null ? "-" : `user ${entry.actor_user_id}`)}</td>
                    <td>
                      <code>{entry.event_type}</code>
                    </td>
                    <td>{entry.target ?? "-"}</td>
                    <td>{entry.client_ip ?? "-"}</td>
                    <td>
                      <code class="audit-details">{Object.keys(entry.details).length ? JSON.stringify(entry.details) : "-"}</code>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          {list.data.entries.length === 0 ? <p class="muted">No entries{filters.event_type ? " of this type" : ""}.</p> : null}
          <nav class="row" aria-label="Audit pages">
            <button type="button" disabled={pages.index === 0} onClick={pages.first}>
              Newest
            </button>
            <button type="button" disabled={pages.index === 0} onClick={pages.back}>
              Newer
            </button>
            <button type="button" disabled={!list.data.next_cursor} onClick={() => pages.forward(list.data!.next_cursor!)}>
              Older
            </button>
            <span class="muted">Page {pages.index + 1}</span>
          </nav>
        </>
      ) : list.loading ? (
        <p aria-busy="true">Loading…</p>
      ) : null}
    </Page>
  );
}
