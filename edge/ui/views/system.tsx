import type { z } from "zod";
import type { SystemStatus, SystemWorker } from "../../../shared/schemas/system";
import { call, endpoints } from "../api";
import { ErrorNote } from "../components/error-note";
import { formatTime } from "../components/format";
import { useLiveText, useQueueChanges } from "../components/live";
import { Page, Panel } from "../components/page";
import { useLoad } from "../components/use-load";
import { href } from "../router";
import type { ViewProps } from "../view-props";
import { Labels, Trainers, WorkerStatus } from "./system-parts";
import "./system.css";

interface Tile {
  index: number;
  name: string;
  memory: string;
  jobId: string | null;
}

const gib = (mb: number) => `${Math.round((mb / 1024) * 10) / 10} GiB`;

/**
 * One box's GPUs as a grid, one tile per device: its index, model and memory, and "free" or the
 * job holding it (a link). Held and free differ in words and pattern, not in colour alone.
 */
function GpuGrid({ box, tiles }: { box: string; tiles: Tile[] }) {
  if (!tiles.length) return <p class="muted">No GPUs registered: this box runs CPU jobs only.</p>;
  const held = tiles.filter((t) => t.jobId).length;
  return (
    <>
      <p>
        {held} of {tiles.length} GPUs in use.
      </p>
      <ul class="gpu-grid" aria-label={`GPUs of ${box}`}>
        {tiles.map((tile) => (
          <li key={tile.index} class={tile.jobId ? "gpu-tile gpu-held" : "gpu-tile gpu-free"}>
            <span class="gpu-index">GPU {tile.index}</span>
            <span class="gpu-model">{tile.name}</span>
            <span class="muted">{tile.memory}</span>
            {tile.jobId ? (
              <span class="gpu-holder">
                held by <a href={href("jobs", tile.jobId)}>{tile.jobId}</a>
              </span>
            ) : (
              <span class="gpu-holder">free</span>
            )}
          </li>
        ))}
      </ul>
    </>
  );
}

/** The local box: its devices from GET /api/system/status (the allocator's own view) and its host figures. */
function LocalBox({ status, worker }: { status: z.output<typeof SystemStatus>; worker: z.output<typeof SystemWorker> | undefined }) {
  const caps = status.gpu_inventory.capabilities;
  const devices = status.gpu_allocation?.devices ?? [];
  const title = caps.local_box ? `Local box: ${caps.local_box}` : "Local box";
  return (
    <Panel title={title} id="local-box">
      {caps.local_box ? (
        <>
          <p class="row">
            <span>{worker ? <WorkerStatus status={worker.status} /> : caps.online ? "online" : "offline"}</span>
            <span class="muted">last heartbeat {formatTime(worker?.last_seen)}</span>
            <span class="muted">load (5 min) {status.load_avg_5min ?? "-"}</span>
            <span class="muted">memory {status.memory_percent === null ? "-" : `${status.memory_percent}%`}</span>
            <span class="muted">{status.gpu_allocation?.running_local_jobs ?? 0} local job(s) running</span>
          </p>
          <div class="row">
            <span>Trainers:</span> <Trainers trainers={worker?.trainers ?? null} />
          </div>
          <GpuGrid
            box={caps.local_box}
            tiles={devices.map((d) => ({ index: d.index, name: d.name, memory: `${d.memory_gb} GiB`, jobId: d.job_id }))}
          />
        </>
      ) : (
        <p class="muted">No local GPU box is registered. `npm start` starts one; an admin can add one under Workers.</p>
      )}
    </Panel>
  );
}

/** A remote worker: status, labels, last heartbeat, the trainers it runs and its GPU grid. */
function RemoteWorker({ worker }: { worker: z.output<typeof SystemWorker> }) {
  return (
    <Panel title={`Worker: ${worker.name}`} id={`worker-${worker.id}`}>
      <dl class="worker-facts">
        <dt>Status</dt>
        <dd>
          <WorkerStatus status={worker.status} />
        </dd>
        <dt>Labels</dt>
        <dd>
          <Labels labels={worker.labels} />
        </dd>
        <dt>Last heartbeat</dt>
        <dd>{formatTime(worker.last_seen)}</dd>
        <dt>Trainers</dt>
        <dd>
          <Trainers trainers={worker.trainers} />
        </dd>
      </dl>
      <GpuGrid
        box={worker.name}
        tiles={worker.gpus.map((g) => ({ index: g.index, name: g.name, memory: gib(g.memory_mb), jobId: g.job_id }))}
      />
    </Panel>
  );
}

/**
 * GPUs and workers: the GPU allocation per device on each box, and every remote worker with its
 * labels and status. Loaded again when jobs change status (they take and free GPUs when they start and end).
 */
export function SystemView(_props: ViewProps) {
  const loaded = useLoad(
    () =>
      Promise.all([call(endpoints.systemStatus, { query: { include_allocation: true } }), call(endpoints.systemWorkers, {})]).then(
        ([status, workers]) => ({ status, workers: workers.workers }),
      ),
    [],
  );
  const live = useQueueChanges(() => void loaded.reload());
  const liveText = useLiveText(live);
  const data = loaded.data;
  const remote = data?.workers.filter((w) => w.role === "remote") ?? [];
  return (
    <Page
      title="GPUs and workers"
      actions={
        <>
          <span class={`muted live-note live-${live}`} role="status" aria-live="polite">
            {liveText}
          </span>
          <button type="button" onClick={() => void loaded.reload()} disabled={loaded.loading}>
            Refresh
          </button>
        </>
      }
    >
      <ErrorNote error={loaded.error} />
      {!data ? (
        loaded.error ? null : (
          <p aria-busy="true">Loading…</p>
        )
      ) : (
        <>
          <LocalBox status={data.status} worker={data.workers.find((w) => w.role === "local")} />
          <h2 class="section-title">Remote workers</h2>
          {remote.length ? (
            remote.map((w) => <RemoteWorker key={w.id} worker={w} />)
          ) : (
            <p class="muted">No remote workers. An admin adds them under Workers.</p>
          )}
        </>
      )}
    </Page>
  );
}
