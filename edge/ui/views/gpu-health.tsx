import { useState } from "preact/hooks";
import type { z } from "zod";
import type { GpuHealthPoint, GpuQuarantine } from "../../../shared/schemas/system";
import { call, endpoints, type ServiceError } from "../api";
import { ErrorNote } from "../components/error-note";
import { formatTime } from "../components/format";
import { Plot } from "../components/plot";
import { useLoad } from "../components/use-load";
import { can } from "../session";

type Point = z.output<typeof GpuHealthPoint>;
type Quarantine = z.output<typeof GpuQuarantine>;

const orDash = (v: number | null, unit: string) => (v === null ? "-" : `${Math.round(v * 10) / 10}${unit}`);

/** A GPU's latest health in one line: utilisation, memory, temperature; "n/a" for what nvidia-smi could not give. */
export function HealthLine({ health }: { health: Point | null }) {
  if (!health) return <span class="muted">no health reported</span>;
  const memory =
    health.memory_used_mb === null || health.memory_total_mb === null
      ? "-"
      : `${Math.round(health.memory_used_mb / 102.4) / 10} of ${Math.round(health.memory_total_mb / 102.4) / 10} GiB`;
  return (
    <span class="gpu-health muted">
      {orDash(health.utilization_percent, " %")} busy, {memory}, {orDash(health.temperature_c, " °C")}
    </span>
  );
}

/**
 * A quarantined GPU's reason and since when, and for an admin the button that puts it back into
 * allocation (POST .../clear; the API refuses anyone else anyway).
 */
export function QuarantineNote({
  workerId,
  index,
  quarantine,
  cleared,
}: {
  workerId: number;
  index: number;
  quarantine: Quarantine;
  cleared: () => void;
}) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ServiceError | null>(null);
  const clear = async () => {
    setBusy(true);
    setError(null);
    try {
      await call(endpoints.gpuClear, { params: { id: workerId, index: String(index) } });
      cleared();
    } catch (e) {
      setError(e as ServiceError);
    } finally {
      setBusy(false);
    }
  };
  return (
    <div class="gpu-quarantine">
      <span>
        <strong>Quarantined</strong>: <span class="gpu-reason">{quarantine.reason}</span>
      </span>
      <span class="muted">since {formatTime(quarantine.since)}</span>
      {can("admin") ? (
        <button type="button" onClick={() => void clear()} disabled={busy}>
          Clear GPU {index}
        </button>
      ) : null}
      <ErrorNote error={error} />
    </div>
  );
}

/** One GPU's last 24 h: utilisation and temperature plotted, and every sample with a fault listed. */
export function GpuHistory({ workerId, index, box }: { workerId: number; index: number; box: string }) {
  const loaded = useLoad(() => call(endpoints.gpuHealth, { params: { id: workerId, index: String(index) }, query: {} }), [workerId, index]);
  const points = loaded.data?.points ?? [];
  const faults = points.filter((p) => p.fault || p.probe_error || p.xids.length);
  return (
    <section class="gpu-history" aria-label={`Health of GPU ${index} of ${box}, last 24 hours`}>
      <h3>
        GPU {index}: last 24 hours ({points.length} sample{points.length === 1 ? "" : "s"}, one a minute)
      </h3>
      <ErrorNote error={loaded.error} />
      {points.length ? (
        <Plot
          title={`GPU ${index} utilisation and temperature`}
          data={[points.map((p) => Date.parse(p.at) / 1000), points.map((p) => p.utilization_percent), points.map((p) => p.temperature_c)]}
          series={[{ label: "utilisation %" }, { label: "temperature °C", scale: "y2" }]}
          x={{ label: "time", kind: "time" }}
          y={{ label: "%", y2: "°C" }}
          height={180}
        />
      ) : loaded.data ? (
        <p class="muted">No samples in the last 24 hours.</p>
      ) : null}
      {faults.length ? (
        <table class="gpu-faults">
          <caption>Samples with a fault</caption>
          <thead>
            <tr>
              <th scope="col">At</th>
              <th scope="col">ECC (uncorrected)</th>
              <th scope="col">Retired pages pending</th>
              <th scope="col">Xid</th>
              <th scope="col">Fault</th>
            </tr>
          </thead>
          <tbody>
            {faults.map((p) => (
              <tr key={p.at}>
                <td>{formatTime(p.at)}</td>
                <td>{p.ecc_uncorrected_volatile ?? "n/a"}</td>
                <td>{p.retired_pages_pending === null ? "n/a" : p.retired_pages_pending ? "yes" : "no"}</td>
                <td>{p.xids.join(", ") || "-"}</td>
                <td>{p.fault ?? p.probe_error ?? ""}</td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
    </section>
  );
}
