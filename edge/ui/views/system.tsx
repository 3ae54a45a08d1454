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
import { useState } from "preact/hooks";
import { GpuHistory, HealthLine, QuarantineNote } from "./gpu-health";
import { Labels, Trainers, WorkerStatus } from "./system-parts";
import "./system.css";

type WorkerGpu = z.output<typeof SystemWorker>["gpus"][number];

interface Tile {
  index: number;
  name: string;
  memory: string;
  jobId: string | null;
  /** Its health and quarantine, from GET /api/system/workers. */
  gpu: WorkerGpu | undefined;
}

const gib = (mb: number) => `${Math.round((mb / 1024) * 10) / 10} GiB`;

/**
 * One box's GPUs as a grid, one tile per device: its index, model and memory, its latest health,
 * and "free", the job holding it (a link) or its quarantine (an admin's button clears it). Held,
 * free and quarantined differ in words and pattern, not in colour alone. _Health history_ opens
 * one GPU's last 24 hours below the grid.
 */
function GpuGrid({ box, workerId, tiles, reload }: { box: string; workerId: number | null; tiles: Tile[]; reload: () => void }) {
  const [shown, setShown] = useState<number | null>(null);
  if (!tiles.length) return <p class="muted">No GPUs registered: this box runs CPU jobs only.</p>;
  const held = tiles.filter((t) => t.jobId).length;
  const out = tiles.filter((t) => t.gpu?.quarantine).length;
  const kind = (t: Tile) => (t.gpu?.quarantine ? "gpu-quarantined" : t.jobId ? "gpu-held" : "gpu-free");
  return (
    <>
      <p>
        {held} of {tiles.length} GPUs in use{out ? `, ${out} quarantined` : ""}.
      </p>
      <ul class="gpu-grid" aria-label={`GPUs of ${box}`}>
        {tiles.map((tile) => (
          <li key={tile.index} class={`gpu-tile ${kind(tile)}`}>
            <span class="gpu-index">GPU {tile.index}</span>
            <span class="gpu-model">{tile.name}</span>
            <span class="muted">{tile.memory}</span>
            {tile.jobId ? (
              <span class="gpu-holder">
                held by <a href={href("jobs", tile.jobId)}>{tile.jobId}</a>
              </span>
            ) : tile.gpu?.quarantine ? null : (
              <span class="gpu-holder">free</span>
            )}
            <HealthLine health={tile.gpu?.health ?? null} />
            {tile.gpu?.quarantine && workerId !== null ? (
              <QuarantineNote workerId={workerId} index={tile.index} quarantine={tile.gpu.quarantine} cleared={reload} />
            ) : null}
            {workerId !== null ? (
              <button
                type="button"
                aria-label={`${shown === tile.index ? "Hide health history" : "Health history"} of GPU ${tile.index}`}
                aria-expanded={shown === tile.index}
                onClick={() => setShown(shown === tile.index ? null : tile.index)}
              >
                {shown === tile.index ? "Hide health history" : "Health history"}
              </button>
            ) : null}
          </li>
        ))}
      </ul>
      {shown !== null && workerId !== null ? <GpuHistory workerId={workerId} index={shown} box={box} /> : null}
    </>
  );
}

/** The local box: its devices from GET /api/system/status (the allocator's own view) and its host figures. */
function LocalBox({
  status,
  worker,
  reload,
}: {
  status: z.output<typeof SystemStatus>;
  worker: z.output<typeof SystemWorker> | undefined;
  reload: () => void;
}) {
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
            workerId={worker?.id ?? null}
            reload={reload}
            tiles={devices.map((d) => ({
              index: d.index,
              name: d.name,
              memory: `${d.memory_gb} GiB`,
              jobId: d.job_id,
              gpu: worker?.gpus.find((g) => g.index === d.index),
            }))}
          />
        </>
      ) : (
        <p class="muted">No local GPU box is registered. `npm start` starts one; an admin can add one under Workers.</p>
      )}
    </Panel>
  );
}

/** A remote worker: status, labels, last heartbeat, the trainers it runs and its GPU grid. */
function RemoteWorker({ worker, reload }: { worker: z.output<typeof SystemWorker>; reload: () => void }) {
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
        workerId={worker.id}
        reload={reload}
        tiles={worker.gpus.map((g) => ({ index: g.index, name: g.name, memory: gib(g.memory_mb), jobId: g.job_id, gpu: g }))}
      />
    </Panel>
  );
}

/**
 * GPUs and workers: the GPU allocation per device on each box with each GPU's health and
 * quarantine, and every remote worker with its labels and status. Loaded again when jobs change status (they take and free GPUs when they start and end).
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
          <LocalBox status={data.status} worker={data.workers.find((w) => w.role === "local")} reload={() => void loaded.reload()} />
          <h2 class="section-title">Remote workers</h2>
          {remote.length ? (
            remote.map((w) => <RemoteWorker key={w.id} worker={w} reload={() => void loaded.reload()} />)
          ) : (
            <p class="muted">No remote workers. An admin adds them under Workers.</p>
          )}
        </>
      )}
    </Page>
  );
}
