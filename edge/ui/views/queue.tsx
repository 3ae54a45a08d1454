import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import type { z } from "zod";
import type { PublicQueueEntry, QueueEntry, QueueStats } from "../../../shared/schemas/queue";
import { call, endpoints } from "../api";
import { ErrorNote } from "../components/error-note";
import { Field } from "../components/field";
import { useLiveText, useQueueChanges, type LiveState } from "../components/live";
import { formatClock, formatDuration, formatFromNow, formatTime } from "../components/format";
import { Page, Panel } from "../components/page";
import { PageSizeField, useCursorPages } from "../components/paging";
import { Plot } from "../components/plot";
import { useAction, useLoad } from "../components/use-load";
import { href, replaceQuery, route } from "../router";
import { can, me } from "../session";
import type { ViewProps } from "../view-props";
import "./queue.css";

type Job = QueueEntry | PublicQueueEntry;

/** The status filter's choices: the API's active statuses, or every entry with the finished ones. */
const STATUS_CHOICES = [
  { value: "", label: "Active (pending, running, blocked)" },
  { value: "pending", label: "Pending" },
  { value: "running", label: "Running" },
  { value: "blocked", label: "Blocked (awaiting approval)" },
  { value: "all", label: "All, finished included" },
] as const;
const PAGE_SIZES = ["10", "25", "50", "100"];
const HOURS = ["1", "6", "24", "72", "168"];

const isFull = (job: Job): job is QueueEntry => "config_name" in job;
const isWaiting = (job: Job) => job.status === "pending" || job.status === "blocked";

/** The filters in the location's query, so a filtered queue can be bookmarked. */
function useFilters() {
  const query = route.value.query;
  const status = query.get("status") ?? "";
  return {
    status: STATUS_CHOICES.some((c) => c.value === status) ? status : "",
    user: query.get("user") ?? "",
    limit: PAGE_SIZES.includes(query.get("limit") ?? "") ? query.get("limit")! : "25",
    hours: HOURS.includes(query.get("hours") ?? "") ? query.get("hours")! : "24",
  };
}
type Filters = ReturnType<typeof useFilters>;

function setFilter(filters: Filters, change: Partial<Filters>) {
  const next = { ...filters, ...change };
  // Defaults stay out of the URL, so the plain view's address is plain #/queue.
  replaceQuery({
    status: next.status || undefined,
    user: next.user || undefined,
    limit: next.limit === "25" ? undefined : next.limit,
    hours: next.hours === "24" ? undefined : next.hours,
  });
}

/**
 * Reloads `loaded` each time `changes` (a count of the queue's change bursts) moves past the count
 * it was mounted at (its first load is its own); with `atMostEveryMs`, a change within that time
 * of the last reload is folded into one reload at its end (the history reads many entries, and its
 * buckets are minutes wide: a busy queue must not make every open page read them every second).
 */
function useReloadOn(changes: number, loaded: { reload: () => Promise<void> }, atMostEveryMs = 0) {
  const seen = useRef(changes);
  const last = useRef(Date.now());
  const pending = useRef<ReturnType<typeof setTimeout> | null>(null);
  useEffect(() => {
    if (changes === seen.current) return;
    seen.current = changes;
    if (pending.current) return;
    const reload = () => {
      pending.current = null;
      last.current = Date.now();
      void loaded.reload();
    };
    const wait = last.current + atMostEveryMs - Date.now();
    if (wait <= 0) reload();
    else pending.current = setTimeout(reload, wait);
  }, [changes]);
  useEffect(() => () => void (pending.current && clearTimeout(pending.current)), []);
}

/** The history panel follows changes at most this often. */
const HISTORY_RELOAD_MS = 30_000;

/** The queue: its numbers, its depth over the last hours, and the jobs a page at a time; all three follow the queue's change stream. */
export function QueueView(_props: ViewProps) {
  const filters = useFilters();
  const [changes, setChanges] = useState(0);
  const live = useQueueChanges(() => setChanges((n) => n + 1));
  return (
    <Page
      title="Queue"
      actions={
        can("researcher") ? (
          <a class="button-link" href={href("submit")}>
            Submit a job
          </a>
        ) : null
      }
    >
      <StatsPanel changes={changes} />
      <HistoryPanel filters={filters} changes={changes} />
      <JobsPanel key={`${filters.status}|${filters.user}|${filters.limit}`} filters={filters} changes={changes} live={live} />
    </Page>
  );
}

function StatsPanel({ changes }: { changes: number }) {
  const stats = useLoad(() => call(endpoints.queueStats, {}), []);
  useReloadOn(changes, stats);
  const s: z.output<typeof QueueStats> | undefined = stats.data;
  return (
    <Panel title="Now" id="queue-now">
      <ErrorNote error={stats.error} />
      {s ? (
        <dl class="queue-stats">
          <div>
            <dt>Pending</dt>
            <dd>{s.by_status.pending ?? 0}</dd>
          </div>
          <div>
            <dt>Running</dt>
            <dd>{s.by_status.running ?? 0}</dd>
          </div>
          <div>
            <dt>Awaiting approval</dt>
            <dd>{s.by_status.blocked ?? 0}</dd>
          </div>
          <div>
            <dt>Mean wait (7 days)</dt>
            <dd>{formatDuration(s.avg_wait_seconds)}</dd>
          </div>
          <div>
            <dt>Local GPUs free</dt>
            <dd>
              {s.local.available_gpus.length} of {s.local.total_gpus}
            </dd>
          </div>
          <div>
            <dt>Limits</dt>
            <dd>
              {s.max_concurrent} cloud jobs, {s.user_max_concurrent} per user, {s.local_job_max_concurrent} local
            </dd>
          </div>
        </dl>
      ) : stats.loading ? (
        <p class="muted">Loading…</p>
      ) : null}
    </Panel>
  );
}

function HistoryPanel({ filters, changes }: { filters: Filters; changes: number }) {
  const hours = Number(filters.hours);
  const history = useLoad(() => call(endpoints.queueHistory, { query: { hours } }), [hours]);
  useReloadOn(changes, history, HISTORY_RELOAD_MS);
  const data = useMemo((): [number[], ...(number | null)[][]] | null => {
    const buckets = history.data?.buckets;
    if (!buckets) return null;
    return [
      buckets.map((b) => b.at),
      buckets.map((b) => b.depth),
      buckets.map((b) => (b.mean_wait_seconds === null ? null : Math.round((b.mean_wait_seconds / 60) * 10) / 10)),
    ];
  }, [history.data]);
  return (
    <Panel title="Depth and wait" id="queue-history">
      <div class="row">
        <Field label="Over the last">
          <select value={filters.hours} onChange={(event) => setFilter(filters, { hours: event.currentTarget.value })}>
            {HOURS.map((h) => (
              <option key={h} value={h}>
                {h === "1" ? "hour" : Number(h) % 24 === 0 && h !== "24" ? `${Number(h) / 24} days` : `${h} hours`}
              </option>
            ))}
          </select>
        </Field>
      </div>
      <ErrorNote error={history.error} />
      {data ? (
        <Plot
          title={`Waiting jobs and mean wait, last ${hours} h`}
          data={data}
          series={[{ label: "Waiting jobs" }, { label: "Mean wait (min)", scale: "y2" }]}
          x={{ label: "Time", kind: "time" }}
          y={{ label: "Jobs waiting", y2: "Minutes" }}
          stepped
        />
      ) : null}
      {history.data?.truncated ? <p class="notice">More jobs than one history reads: the oldest buckets undercount.</p> : null}
    </Panel>
  );
}

function JobsPanel({ filters, changes, live }: { filters: Filters; changes: number; live: LiveState }) {
  const pages = useCursorPages();
  const cursor = pages.cursor;
  const jobs = useLoad(async () => {
    const page = await call(endpoints.queueList, {
      query: {
        limit: Number(filters.limit),
        ...(filters.status === "all" ? { include_completed: true } : filters.status ? { status: filters.status } : {}),
        ...(filters.user ? { user: filters.user } : {}),
        ...(cursor ? { cursor } : {}),
      },
    });
    // Which page this is travels with it: the previous page stays shown while the next loads.
    return { ...page, first: pages.index * Number(filters.limit) };
  }, [cursor]);
  // The page being shown again, at its own cursor: a change never moves the reader to another page.
  useReloadOn(changes, jobs);
  const liveText = useLiveText(live);
  const page = jobs.data;
  return (
    <Panel title="Jobs" id="queue-jobs">
      <Filters filters={filters} />
      <ErrorNote error={jobs.error} />
      {page ? (
        <>
          <p class="muted" aria-live="polite">
            {page.total === 0 ? "No jobs match." : `Jobs ${page.first + 1} to ${page.first + page.jobs.length} of ${page.total}.`}
          </p>
          {page.jobs.length ? (
            <div class="table-wrap">
              <table class="queue-table">
                <thead>
                  <tr>
                    <th scope="col">Job</th>
                    <th scope="col">Name and environment</th>
                    <th scope="col">Owner</th>
                    <th scope="col">Status</th>
                    <th scope="col">Priority</th>
                    <th scope="col">Position and why it waits</th>
                    <th scope="col">Expected start</th>
                    <th scope="col">GPUs or worker</th>
                    <th scope="col">Submitted</th>
                    <th scope="col">Actions</th>
                  </tr>
                </thead>
                <tbody>
                  {page.jobs.map((job) => (
                    <JobRow key={job.job_id} job={job} reload={jobs.reload} />
                  ))}
                </tbody>
              </table>
            </div>
          ) : null}
        </>
      ) : jobs.loading ? (
        <p class="muted">Loading…</p>
      ) : null}
      <nav class="row pager" aria-label="Pages of jobs">
        <button type="button" disabled={pages.index === 0 || jobs.loading} onClick={pages.back}>
          Previous
        </button>
        <button type="button" disabled={!page?.next_cursor || jobs.loading} onClick={() => pages.forward(page!.next_cursor!)}>
          Next
        </button>
        <button type="button" disabled={jobs.loading} onClick={() => void jobs.reload()}>
          Reload
        </button>
        <span class={`muted live-note live-${live}`} role="status" aria-live="polite">
          {liveText}
        </span>
      </nav>
    </Panel>
  );
}

function Filters({ filters }: { filters: Filters }) {
  const [user, setUser] = useState(filters.user);
  return (
    <form
      class="row queue-filters"
      onSubmit={(event) => {
        event.preventDefault();
        setFilter(filters, { user: user.trim() });
      }}
    >
      <Field label="Status">
        <select value={filters.status} onChange={(event) => setFilter(filters, { status: event.currentTarget.value })}>
          {STATUS_CHOICES.map((c) => (
            <option key={c.value} value={c.value}>
              {c.label}
            </option>
          ))}
        </select>
      </Field>
      <Field label="Owner" hint="A username; empty for everyone">
        <input value={user} onInput={(event) => setUser(event.currentTarget.value)} autoComplete="off" maxLength={254} />
      </Field>
      <button type="submit">Apply owner</button>
      {me.value ? (
        <button type="button" onClick={() => setFilter(filters, { user: me.value!.username })}>
          My jobs
        </button>
      ) : null}
      <PageSizeField sizes={PAGE_SIZES} value={filters.limit} onChange={(limit) => setFilter(filters, { limit })} />
    </form>
  );
}

/** Where the job waits and why, in words. */
function waitText(job: Job): string {
  if (job.status === "blocked") return "Awaiting an admin's approval";
  if (job.status !== "pending") return "-";
  const why = job.wait_message ?? job.wait_reason?.replaceAll("_", " ") ?? "";
  return job.position === null ? why || "-" : `#${job.position}${why ? `: ${why}` : ""}`;
}

/**
 * When a waiting job is expected to start, relative to now, with how that was estimated as text
 * beneath (and as its tooltip); "unknown" with the reason. Another user's job shows the time only.
 */
function ExpectedStart({ job }: { job: Job }) {
  if (job.status !== "pending" && job.status !== "blocked") return <span class="muted">-</span>;
  const basis = isFull(job) ? job.expected_start_basis : null;
  const when = job.expected_start_at ? formatFromNow(job.expected_start_at) : "unknown";
  return (
    <span title={basis ?? undefined}>
      {job.expected_start_at ? <time dateTime={job.expected_start_at}>{when}</time> : when}
      {basis ? <div class="muted queue-basis">{basis.replace(/^unknown: /, "")}</div> : null}
    </span>
  );
}

function placeText(job: Job): string {
  if (!isFull(job)) return "-";
  if (job.worker_name) return `worker ${job.worker_name}`;
  if (job.allocated_gpus?.length) return `GPUs ${job.allocated_gpus.join(", ")}`;
  if (job.status === "running") return "CPU";
  return job.num_processes === 0 ? "needs the CPU" : `needs ${job.num_processes} GPU${job.num_processes === 1 ? "" : "s"}`;
}

function nameOf(job: QueueEntry): string | null {
  const name = job.metadata?.run_name ?? job.metadata?.name;
  return typeof name === "string" && name ? name : null;
}

function JobRow({ job, reload }: { job: Job; reload: () => Promise<void> }) {
  const params = { job_id: job.job_id };
  const cancel = useAction(() => call(endpoints.queueCancel, { params }), reload);
  const approve = useAction(() => call(endpoints.queueApprove, { params }), reload);
  const reject = useAction((reason: string) => call(endpoints.queueReject, { params, query: { reason } }), reload);
  const priority = useAction((value: number | null) => call(endpoints.queuePriority, { params, body: { priority: value } }), reload);
  const [reason, setReason] = useState("");
  const [newPriority, setNewPriority] = useState(String(isFull(job) ? (job.priority_override ?? job.priority) : job.priority));

  const waiting = isWaiting(job);
  const mayCancel = waiting && can("researcher") && (can("lead") || job.user_id === me.value?.id);
  const mayDecide = job.status === "blocked" && can("admin");
  const mayPrioritise = waiting && can("lead");
  const full = isFull(job) ? job : null;
  const errors = [cancel.error, approve.error, reject.error, priority.error];
  return (
    <tr>
      <td>
        <a href={href("jobs", job.job_id)}>
          <code>{job.job_id}</code>
        </a>
      </td>
      <td>
        {full ? (
          <>
            {nameOf(full) ? <div class="queue-name">{nameOf(full)}</div> : null}
            <div class="muted">{full.config_name ?? "-"}</div>
          </>
        ) : (
          <span class="muted">-</span>
        )}
      </td>
      <td>{job.owner ?? "-"}</td>
      <td>
        <span class={`badge status-${job.status}`}>{job.status}</span>
        {"stalled_since" in job && job.stalled_since && job.status === "running" ? (
          <span class="badge status-stalled" title={`No training step since ${job.stalled_since}`}>
            stalled
          </span>
        ) : null}
      </td>
      <td>
        {job.effective_priority}
        {job.effective_priority !== job.priority ? <span class="muted"> (level {job.priority})</span> : null}
      </td>
      <td>{waitText(job)}</td>
      <td>
        <ExpectedStart job={job} />
      </td>
      <td>
        {placeText(job)}
        {full?.expected_end_at ? <div class="muted">ends ~{formatClock(full.expected_end_at)}</div> : null}
      </td>
      <td>{formatTime(job.queued_at)}</td>
      <td class="queue-actions">
        {mayCancel ? (
          <button type="button" class="danger" disabled={cancel.busy} onClick={() => void cancel.run()} aria-label={`Cancel ${job.job_id}`}>
            Cancel
          </button>
        ) : null}
        {mayDecide ? (
          <>
            <button
              type="button"
              class="primary"
              disabled={approve.busy}
              onClick={() => void approve.run()}
              aria-label={`Approve ${job.job_id}`}
            >
              Approve
            </button>
            <form
              class="queue-inline"
              onSubmit={(event) => {
                event.preventDefault();
                void reject.run(reason);
              }}
            >
              <input
                value={reason}
                onInput={(event) => setReason(event.currentTarget.value)}
                aria-label={`Reason to reject ${job.job_id}`}
                placeholder="Reason"
                required
                maxLength={1000}
              />
              <button type="submit" class="danger" disabled={reject.busy} aria-label={`Reject ${job.job_id}`}>
                Reject
              </button>
            </form>
          </>
        ) : null}
        {mayPrioritise ? (
          <form
            class="queue-inline"
            onSubmit={(event) => {
              event.preventDefault();
              void priority.run(newPriority === "" ? null : Number(newPriority));
            }}
          >
            <input
              type="number"
              min={0}
              max={100}
              step={1}
              class="queue-priority"
              value={newPriority}
              onInput={(event) => setNewPriority(event.currentTarget.value)}
              aria-label={`Priority of ${job.job_id}`}
              title="Empty returns to the level's priority"
            />
            <button type="submit" disabled={priority.busy} aria-label={`Set the priority of ${job.job_id}`}>
              Set
            </button>
          </form>
        ) : null}
        {errors.map((error, i) => (
          <ErrorNote key={i} error={error} />
        ))}
      </td>
    </tr>
  );
}
