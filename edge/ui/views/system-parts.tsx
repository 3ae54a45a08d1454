/** The worker statuses in words: colour is only a second cue. */
const WORKER_STATUS_WORDS: Record<string, string> = {
  connecting: "connecting (never registered)",
  IDLE: "online, idle",
  busy: "online, busy",
  draining: "draining (takes no new jobs)",
  offline: "offline",
};

/** A worker's status as text with its colour class. */
export function WorkerStatus({ status }: { status: string }) {
  const kind = status === "IDLE" || status === "busy" ? "online" : status;
  return <span class={`worker-status worker-${kind}`}>{WORKER_STATUS_WORDS[status] ?? status}</span>;
}

/** A worker's labels as `name=value` badges (text, never markup), or "none". */
export function Labels({ labels }: { labels: Record<string, string> }) {
  const entries = Object.entries(labels);
  if (!entries.length) return <span class="muted">none</span>;
  return (
    <ul class="labels" aria-label="Labels">
      {entries.map(([name, value]) => (
        <li key={name} class="badge">
          {name}={value}
        </li>
      ))}
    </ul>
  );
}

/** One trainer a runner said it can run, or cannot and why. */
interface TrainerFact {
  name: string;
  available: boolean;
  version?: string | null;
  detail?: string | null;
}

/**
 * The trainers a box's runner can run (SimpleTuner with its version), and those it cannot with the
 * reason as a second line; "not reported" for a runner that did not say (it takes any job).
 */
export function Trainers({ trainers }: { trainers: TrainerFact[] | null }) {
  if (!trainers) return <span class="muted">not reported (takes any job)</span>;
  return (
    <ul class="trainers" aria-label="Trainers">
      {trainers.map((t) =>
        t.available ? (
          <li key={t.name} class="badge trainer-on">
            {t.name}
            {t.version ? ` ${t.version}` : ""}
          </li>
        ) : (
          <li key={t.name} class="trainer-off">
            <span class="badge">{t.name}: not available</span> <span class="muted">{t.detail ?? ""}</span>
          </li>
        ),
      )}
    </ul>
  );
}
