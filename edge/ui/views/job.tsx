import type { ComponentChildren } from "preact";
import { useEffect, useLayoutEffect, useMemo, useRef, useState } from "preact/hooks";
import type { z } from "zod";
import type { QueueJob } from "../../../shared/schemas/queue";
import { plainText } from "../../../shared/terminal-text";
import { call, endpoints } from "../api";
import { ErrorNote } from "../components/error-note";
import { formatDuration, formatFromNow, formatTime, formatUsd } from "../components/format";
import { Page, Panel } from "../components/page";
import { Plot } from "../components/plot";
import { useAction, useLoad } from "../components/use-load";
import { href } from "../router";
import { can, me } from "../session";
import type { ViewProps } from "../view-props";
import { etaSeconds, stepRate, type TrainingState } from "./job-events";
import { useJobStream } from "./job-stream";
import "./job.css";

type Job = z.output<typeof QueueJob>;
type FullJob = Extract<Job, { config_name: unknown }>;

const isFull = (job: Job): job is FullJob => "config_name" in job;
const ACTIVE = ["pending", "running", "blocked"];

/** One term of the job's summary. */
function Term({ label, children }: { label: string; children: ComponentChildren }) {
  return (
    <div>
      <dt>{label}</dt>
      <dd>{children}</dd>
    </div>
  );
}

/** Where a waiting job stands in the queue and why it waits. */
function Waiting({ jobId }: { jobId: string }) {
  const position = useLoad(() => call(endpoints.queuePosition, { params: { job_id: jobId } }), [jobId]);
  const p = position.data;
  return (
    <div class="notice job-waiting">
      {p ? (
        <p>
          {p.position !== null ? `Position ${p.position} in the queue` : "Waiting"}
          {p.waiting_ahead !== null ? ` (${p.waiting_ahead} ahead)` : ""}
          {p.wait_reason ? (
            <>
              : <code>{p.wait_reason}</code>
            </>
          ) : null}
          {p.wait_message ? ` - ${p.wait_message}` : ""}{" "}
          <button type="button" onClick={() => void position.reload()} disabled={position.loading}>
            Refresh position
          </button>
        </p>
      ) : (
        <p class="muted">{position.loading ? "Asking for the job's position..." : null}</p>
      )}
      <ErrorNote error={position.error} />
    </div>
  );
}

/** A cloud job's phase and cost (GET /api/cloud/jobs/{id}). */
function CloudTerms({ jobId, version }: { jobId: string; version: number }) {
  const cloud = useLoad(() => call(endpoints.cloudJob, { params: { job_id: jobId } }), [jobId, version]);
  if (cloud.error) return <ErrorNote error={cloud.error} />;
  const c = cloud.data;
  if (!c) return null;
  return (
    <>
      <Term label="Provider">
        {c.provider} ({c.hardware})
      </Term>
      <Term label="Phase">
        {c.phase}
        {c.phase === "uploading" ? ` (${Math.round(c.upload_progress * 100)}%)` : ""}
      </Term>
      <Term label="Cost">
        {formatUsd(c.cost_usd)}
        {c.cost_final ? "" : ` so far (estimate ${formatUsd(c.estimated_cost)})`}
      </Term>
    </>
  );
}

function Summary({ job, status, version, stalledSince }: { job: Job; status: string; version: number; stalledSince?: string | null }) {
  const full = isFull(job) ? job : null;
  // The events say it live; before any stall event, the job as loaded.
  const stalled = status === "running" ? (stalledSince === undefined ? (full?.stalled_since ?? null) : stalledSince) : null;
  return (
    <dl class="job-terms">
      <Term label="Status">
        <span class={`badge status-${status}`}>{status}</span>
        {stalled ? (
          <span class="badge status-stalled" title={`No training step since ${stalled}`}>
            {" "}
            stalled since {formatTime(stalled)}
          </span>
        ) : null}
      </Term>
      <Term label="Owner">{job.owner ?? "-"}</Term>
      {full ? (
        <>
          <Term label="Environment">{full.config_name ?? "-"}</Term>
          <Term label="Runs on">
            {full.worker_name
              ? `worker ${full.worker_name}`
              : full.allocated_gpus?.length
                ? `GPUs ${full.allocated_gpus.join(", ")}`
                : full.job_type === "cloud"
                  ? `cloud (${full.provider ?? "provider"})`
                  : "-"}
          </Term>
          <Term label="Attempt">
            {full.attempt} of {full.max_attempts}
          </Term>
        </>
      ) : null}
      <Term label="Priority">{job.effective_priority}</Term>
      <Term label="Submitted">{formatTime(job.queued_at)}</Term>
      {full ? (
        <>
          <Term label="Started">{formatTime(full.started_at)}</Term>
          <Term label="Ended">{formatTime(full.completed_at)}</Term>
        </>
      ) : null}
      {full?.expected_end_at && full.expected_end_method ? (
        <Term label="Expected end">
          {formatTime(full.expected_end_at)} <span class="muted">(estimated from {full.expected_end_method.replaceAll("_", " ")})</span>
        </Term>
      ) : null}
      {job.status === "pending" || job.status === "blocked" ? (
        <Term label="Expected start">
          {job.expected_start_at ? (
            <>
              {formatFromNow(job.expected_start_at)} <span class="muted">({formatTime(job.expected_start_at)})</span>
            </>
          ) : (
            "unknown"
          )}
          {full?.expected_start_basis ? <div class="muted">{full.expected_start_basis}</div> : null}
        </Term>
      ) : null}
      {full && (job.status === "pending" || job.status === "blocked") && full.expected_run_basis ? (
        <Term label="Expected run">
          {full.expected_run_seconds != null ? <>about {formatDuration(full.expected_run_seconds)} </> : null}
          <span class="muted">({full.expected_run_basis})</span>
        </Term>
      ) : null}
      {full?.job_type === "cloud" ? <CloudTerms jobId={job.job_id} version={version} /> : null}
    </dl>
  );
}

/** A control button with its own answer and error beside it. */
function Control({
  label,
  action,
  danger,
  after,
}: {
  label: string;
  /** The call; its answer's `message` is shown beside the button. */
  action: () => Promise<unknown>;
  danger?: boolean;
  after?: () => unknown;
}) {
  const [done, setDone] = useState<string | null>(null);
  const act = useAction(action, (answer) => {
    const message = (answer as { message?: unknown })?.message;
    setDone(typeof message === "string" ? message : "Done");
    return after?.();
  });
  return (
    <div class="job-control">
      <button
        type="button"
        class={danger ? "danger" : undefined}
        disabled={act.busy}
        onClick={() => {
          setDone(null);
          void act.run();
        }}
      >
        {label}
      </button>
      {done ? (
        <p class="muted" role="status">
          {done}
        </p>
      ) : null}
      <ErrorNote error={act.error} />
    </div>
  );
}

/** Whether a job may be retried (POST /api/queue/{job_id}/retry): failed, cancelled, or stopped (completed after a stop). */
const retryable = (status: string, stopRequested: boolean) =>
  status === "failed" || status === "cancelled" || (status === "completed" && stopRequested);

function Controls({
  jobId,
  status,
  stopRequested,
  reload,
}: {
  jobId: string;
  status: string;
  stopRequested: boolean;
  reload: () => unknown;
}) {
  const running = status === "running";
  const retry = retryable(status, stopRequested);
  // An ended job takes no command but a retry: no empty panel.
  if (!running && !ACTIVE.includes(status) && !retry) return null;
  return (
    <Panel title="Controls">
      <div class="job-controls">
        {running ? (
          <>
            <Control label="Run a validation" action={() => call(endpoints.trainingValidationRun, { body: { job_id: jobId } })} />
            <Control label="Save a checkpoint" action={() => call(endpoints.trainingCheckpointRun, { body: { job_id: jobId } })} />
            <Control label="Stop training" action={() => call(endpoints.trainingStop, { body: { job_id: jobId } })} />
          </>
        ) : null}
        {ACTIVE.includes(status) ? (
          <Control
            label="Cancel job"
            danger
            // A running job is cancelled through training control (its trainer is killed); a waiting one through the queue.
            action={() =>
              status === "running"
                ? call(endpoints.trainingCancel, { body: { job_id: jobId } })
                : call(endpoints.queueCancel, { params: { job_id: jobId } })
            }
            after={reload}
          />
        ) : null}
        {retry ? <RetryControl jobId={jobId} /> : null}
      </div>
    </Panel>
  );
}

/** Retry: a new job from this one's newest checkpoint; its answer links to the new job's page. */
function RetryControl({ jobId }: { jobId: string }) {
  const [retried, setRetried] = useState<{ id: string; said: string } | null>(null);
  const act = useAction(
    () => call(endpoints.queueRetry, { params: { job_id: jobId } }, { headers: { "Idempotency-Key": crypto.randomUUID() } }),
    (answer) => {
      const from = answer.resume_from ? `from ${answer.resume_from.checkpoint}` : "from the start (no checkpoint recorded)";
      setRetried({ id: answer.job_id ?? "", said: `${answer.status}, ${from}` });
    },
  );
  return (
    <div class="job-control">
      <button type="button" disabled={act.busy || retried !== null} onClick={() => void act.run()}>
        Retry
      </button>
      {retried ? (
        <p class="muted" role="status">
          Retried as <a href={href("jobs", retried.id)}>{retried.id}</a>: {retried.said}
        </p>
      ) : null}
      <ErrorNote error={act.error} />
    </div>
  );
}

function Progress({ training, status }: { training: TrainingState; status: string }) {
  const { step, total } = training;
  const rate = stepRate(training);
  const eta = status === "running" ? etaSeconds(training) : null;
  if (step === null && total === null) return <p class="muted">No training step yet.</p>;
  return (
    <div class="stack">
      <label class="job-progress">
        <span>
          Step {step ?? 0}
          {total !== null ? ` of ${total}` : ""}
          {training.epoch !== null ? `, epoch ${training.epoch}` : ""}
        </span>
        <progress max={total ?? undefined} value={step ?? 0} />
      </label>
      <p class="muted">
        {rate !== null ? `${rate >= 1 ? rate.toFixed(1) : rate.toPrecision(2)} steps/s` : "measuring the step rate"}
        {eta !== null ? `, about ${formatDuration(eta)} left` : ""}
      </p>
    </div>
  );
}

/** The newest log lines, kept scrolled to the end unless the reader scrolled up. */
function LogLines({ training }: { training: TrainingState }) {
  const box = useRef<HTMLDivElement>(null);
  const atEnd = useRef(true);
  useLayoutEffect(() => {
    if (atEnd.current && box.current) box.current.scrollTop = box.current.scrollHeight;
  }, [training.log]);
  if (!training.log.length) return <p class="muted">No log lines yet.</p>;
  return (
    <div
      class="job-log"
      ref={box}
      tabIndex={0}
      aria-label={`Log, the newest ${training.log.length} lines`}
      onScroll={(event) => {
        const el = event.currentTarget;
        atEnd.current = el.scrollHeight - el.scrollTop - el.clientHeight < 24;
      }}
    >
      <ol>
        {training.log.map((line) => (
          <li key={line.index}>
            <span class="muted">{line.clock}</span> <span class="job-log-type">{line.type}</span> {line.text}
          </li>
        ))}
      </ol>
    </div>
  );
}

function Previews({ training }: { training: TrainingState }) {
  if (!training.previews.length)
    return <p class="muted">No preview yet: previews arrive during validations (with --validation_preview true).</p>;
  return (
    <ul class="job-previews">
      {[...training.previews].reverse().map((p) => (
        <li key={p.key}>
          <figure>
            <img src={p.src} alt={p.alt} />
            <figcaption>
              {p.alt}
              {p.prompt ? <span class="muted"> - {p.prompt}</span> : null}
            </figcaption>
          </figure>
        </li>
      ))}
    </ul>
  );
}

function Checkpoints({ training }: { training: TrainingState }) {
  if (!training.checkpoints.length) return <p class="muted">No checkpoint saved yet.</p>;
  return (
    <div class="table-wrap" tabIndex={0} role="region" aria-label="Checkpoints saved">
      <table class="job-checkpoints">
        <thead>
          <tr>
            <th scope="col">Step</th>
            <th scope="col">Saved</th>
            <th scope="col">Path</th>
          </tr>
        </thead>
        <tbody>
          {training.checkpoints.map((c) => (
            <tr key={c.index}>
              <td>
                {c.step ?? "-"}
                {c.onDemand ? " (asked for)" : ""}
              </td>
              <td>{c.clock}</td>
              <td>
                <code>{c.path ?? "-"}</code>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** The live training of a job the user may read: progress, loss, previews, checkpoints, log. */
function Training({ training }: { training: TrainingState }) {
  const data = useMemo(
    () => [training.steps, training.losses, training.rates] as [number[], (number | null)[], (number | null)[]],
    [training.steps],
  );
  return (
    <>
      <Panel title="Loss and learning rate">
        <Plot
          title="Loss and learning rate over steps"
          data={data}
          series={[{ label: "loss" }, { label: "learning rate", scale: "y2" }]}
          x={{ label: "step", kind: "number" }}
          y={{ label: "loss", y2: "learning rate" }}
        />
      </Panel>
      <div class="job-columns">
        <Panel title="Validation previews">
          <Previews training={training} />
        </Panel>
        <Panel title="Checkpoints">
          <Checkpoints training={training} />
        </Panel>
      </div>
      <Panel title="Log">
        <LogLines training={training} />
      </Panel>
    </>
  );
}

/** A job's page (`#/jobs/<job_id>`): its place in the queue, then its training live from the event stream. */
export function JobView({ args }: ViewProps) {
  const jobId = args[0] ?? "";
  const [version, setVersion] = useState(0);
  const job = useLoad(() => call(endpoints.queueJob, { params: { job_id: jobId } }), [jobId, version]);
  // Whether the user may read the job's events: the same rule as the stream's, asked once up front.
  const access = useLoad(() => call(endpoints.trainingStatus, { query: { job_id: jobId } }), [jobId]);
  const stream = useJobStream(jobId, access.data !== undefined, () => setVersion((v) => v + 1));
  const { training } = stream;

  const loaded = job.data;
  const status = stream.endStatus ?? (loaded?.status === "pending" && training.steps.length ? "running" : (loaded?.status ?? "unknown"));
  const startedLive = loaded?.status === "pending" && training.next > 0;
  // The job began while the page was open: its start time, GPUs and worker are known now.
  useEffect(() => {
    if (startedLive) setVersion((v) => v + 1);
  }, [startedLive]);

  const mine = loaded !== undefined && me.value !== null && me.value !== undefined && loaded.user_id === me.value.id;
  const mayControl = can("researcher") && (mine || can("lead"));

  return (
    <Page title={`Job ${jobId}`} actions={<a href={href("queue")}>Back to the queue</a>}>
      <Panel title="Summary">
        {loaded ? <Summary job={loaded} status={status} version={version} stalledSince={training.stalledSince} /> : null}
        {job.loading && !loaded ? <p class="muted">Loading the job...</p> : null}
        <ErrorNote error={job.error} />
        {loaded && (status === "pending" || status === "blocked") ? <Waiting key={version} jobId={jobId} /> : null}
        {loaded && isFull(loaded) && loaded.error_message ? (
          <div class="error">
            {/* Messages stored before issue 26 may still carry colour codes. */}
            <p>{plainText(loaded.error_message)}</p>
          </div>
        ) : null}
      </Panel>
      {loaded && mayControl ? (
        <Controls jobId={jobId} status={status} stopRequested={training.stopRequested} reload={() => setVersion((v) => v + 1)} />
      ) : null}
      <Panel title="Training">
        {access.error ? (
          <ErrorNote error={access.error} />
        ) : (
          <>
            <p class="muted job-stream-phase" role="status">
              {stream.phase === "live"
                ? "Live."
                : stream.phase === "ended"
                  ? `The job has ended (${stream.endStatus ?? "unknown"}): these are all its events.`
                  : stream.phase === "refused"
                    ? "Not following the job's events."
                    : "Connecting to the job's events..."}
            </p>
            <ErrorNote error={stream.error} />
            <Progress training={training} status={status} />
          </>
        )}
      </Panel>
      {access.data !== undefined && !stream.error ? <Training training={training} /> : null}
    </Page>
  );
}
