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
