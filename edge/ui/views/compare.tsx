import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import type { z } from "zod";
import type { RunDetail, RunSeries, RunValidations } from "../../../shared/schemas/runs";
import { asServiceError, call, endpoints, type ServiceError } from "../api";
import { ErrorNote } from "../components/error-note";
import { formatDuration } from "../components/format";
import { Page, Panel } from "../components/page";
import { Plot } from "../components/plot";
import { useLoad } from "../components/use-load";
import { href, route } from "../router";
import type { ViewProps } from "../view-props";
import {
  comparedJobs,
  differingOptions,
  gallery,
  overlay,
  pairImages,
  RUN_COLOURS,
  smooth,
  type GalleryImage,
  type SeriesPoint,
} from "./compare-data";
import "./compare.css";

interface Loaded {
  jobId: string;
  run: z.output<typeof RunDetail> | null;
  series: z.output<typeof RunSeries> | null;
  images: z.output<typeof RunValidations>["images"];
  error: ServiceError | null;
}

async function loadRun(jobId: string): Promise<Loaded> {
  try {
    const [run, series, validations] = await Promise.all([
      call(endpoints.runGet, { params: { job_id: jobId } }),
      call(endpoints.runSeries, { params: { job_id: jobId }, query: {} }),
      call(endpoints.runValidations, { params: { job_id: jobId } }),
    ]);
    return { jobId, run, series, images: validations.images, error: null };
  } catch (error) {
    return { jobId, run: null, series: null, images: [], error: asServiceError(error) };
  }
}

/** A run's name in legends and headings: its job id and environment. */
const runLabel = (r: Loaded) => (r.run?.environment ? `${r.jobId} (${r.run.environment})` : r.jobId);
const stepText = (step: number | null) => (step === null ? "no step" : `step ${step}`);
const promptText = (prompt: string | null) => prompt ?? "(no prompt)";

interface Opened {
  image: GalleryImage;
  run: string;
}

/** The lightbox: one image large, in a modal <dialog> (Escape or Close ends it; focus returns to the thumbnail). */
function Lightbox({ opened, onClose }: { opened: Opened | null; onClose: () => void }) {
  const dialog = useRef<HTMLDialogElement>(null);
  const close = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    if (opened && dialog.current && !dialog.current.open) {
      dialog.current.showModal();
      close.current?.focus();
    }
  }, [opened]);
  const caption = opened ? `${promptText(opened.image.prompt)}, ${stepText(opened.image.step)}, run ${opened.run}` : "";
  return (
    <dialog ref={dialog} class="lightbox" aria-labelledby="lightbox-title" onClose={onClose}>
      <h2 id="lightbox-title">{caption}</h2>
      {opened ? <img src={opened.image.url} alt={`Validation image: ${caption}`} /> : null}
      <div class="row">
        <button type="button" ref={close} onClick={() => dialog.current?.close()}>
          Close
        </button>
      </div>
    </dialog>
  );
}

/** A thumbnail that opens the lightbox. */
function Thumb({ image, run, open }: { image: GalleryImage; run: string; open: (o: Opened) => void }) {
  const what = `${promptText(image.prompt)}, ${stepText(image.step)}, run ${run}`;
  return (
    <button type="button" class="thumb" onClick={() => open({ image, run })} aria-label={`Open ${what}`}>
      <img src={image.url} alt="" loading="lazy" />
    </button>
  );
}

/** One run's gallery: prompts (rows) by steps (columns). */
function RunGallery({ run, open }: { run: Loaded; open: (o: Opened) => void }) {
  const grid = gallery(run.images);
  if (!run.images.length) return <p>{run.jobId}: no validation images.</p>;
  return (
    <div class="table-wrap">
      <table class="gallery">
        <caption>Validation images of {runLabel(run)}</caption>
        <thead>
          <tr>
            <th scope="col">Prompt</th>
            {grid.steps.map((step) => (
              <th scope="col" key={String(step)}>
                {stepText(step)}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {grid.prompts.map((prompt) => (
            <tr key={String(prompt)}>
              <th scope="row" class="gallery-prompt">
                {promptText(prompt)}
              </th>
              {grid.steps.map((step) => (
                <td key={String(step)}>
                  {grid.cell(prompt, step).map((image) => (
                    <Thumb key={image.n} image={image} run={run.jobId} open={open} />
                  ))}
                </td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** Two runs' images side by side, paired by prompt, step and place. */
function SideBySide({ left, right, open }: { left: Loaded; right: Loaded; open: (o: Opened) => void }) {
  const pairs = pairImages(left.images, right.images);
  if (!pairs.length) return <p>Neither run has validation images.</p>;
  return (
    <div class="table-wrap">
      <table class="side-by-side">
        <thead>
          <tr>
            <th scope="col">Prompt and step</th>
            <th scope="col">{runLabel(left)}</th>
            <th scope="col">{runLabel(right)}</th>
          </tr>
        </thead>
        <tbody>
          {pairs.map((p) => (
            <tr key={JSON.stringify([p.prompt, p.step, p.index])}>
              <th scope="row" class="gallery-prompt">
                {promptText(p.prompt)}, {stepText(p.step)}
              </th>
              <td>{p.left ? <Thumb image={p.left} run={left.jobId} open={open} /> : "none"}</td>
              <td>{p.right ? <Thumb image={p.right} run={right.jobId} open={open} /> : "none"}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** The metric overlay: loss and learning rate of every run, by step or by time, smoothed. */
function Overlay({ runs }: { runs: Loaded[] }) {
  const [axis, setAxis] = useState<"step" | "seconds">("step");
  const [weight, setWeight] = useState(0);
  const withSeries = runs.filter((r) => r.series);
  const points = withSeries.map((r) => r.series!.points as SeriesPoint[]);
  const series = withSeries.map((r) => ({ label: runLabel(r), stroke: RUN_COLOURS[runs.indexOf(r) % RUN_COLOURS.length] }));
  const loss = useMemo(() => {
    const [xs, ...columns] = overlay(points, axis, "loss");
    return [xs, ...columns.map((c) => smooth(c, weight))] as [number[], ...(number | null)[][]];
  }, [runs, axis, weight]);
  const lr = useMemo(() => overlay(points, axis, "lr"), [runs, axis]);
  const x = axis === "step" ? { label: "Step", kind: "number" as const } : { label: "Seconds since start", kind: "number" as const };
  return (
    <>
      <fieldset class="row compare-controls">
        <legend>Plot</legend>
        <label class="check">
          <input type="radio" name="axis" value="step" checked={axis === "step"} onChange={() => setAxis("step")} /> By step
        </label>
        <label class="check">
          <input type="radio" name="axis" value="seconds" checked={axis === "seconds"} onChange={() => setAxis("seconds")} /> By time
        </label>
        <label class="field">
          <span class="field-label">Smoothing (loss): {weight.toFixed(2)}</span>
          <input
            type="range"
            name="smoothing"
            min={0}
            max={0.99}
            step={0.01}
            value={weight}
            onInput={(event) => setWeight(Number(event.currentTarget.value))}
          />
        </label>
      </fieldset>
      {withSeries.length ? (
        <>
          <Plot title="Loss" data={loss} series={series} x={x} y={{ label: "Loss" }} />
          <Plot title="Learning rate" data={lr} series={series} x={x} y={{ label: "Learning rate" }} />
          {withSeries.some((r) => r.series!.stride > 1) ? (
            <p class="field-hint">
              Long runs are shown with every n-th step:{" "}
              {withSeries
                .filter((r) => r.series!.stride > 1)
                .map((r) => `${r.jobId} every ${r.series!.stride} of ${r.series!.total_points}`)
                .join("; ")}
              .
            </p>
          ) : null}
        </>
      ) : (
        <p>No run has a series.</p>
      )}
    </>
  );
}

/** The options that differ between the runs, from each job's configuration snapshot (secrets masked by the API). */
function OptionDiff({ runs }: { runs: Loaded[] }) {
  const readable = runs.filter((r) => r.run);
  const diff = differingOptions(readable.map((r) => r.run!.config));
  if (readable.length < 2) return <p>Compare two runs or more to see the options that differ.</p>;
  if (!diff.length) return <p>Every option is the same in these runs.</p>;
  return (
    <div class="table-wrap">
      <table class="option-diff">
        <thead>
          <tr>
            <th scope="col">Option</th>
            {readable.map((r) => (
              <th scope="col" key={r.jobId}>
                {runLabel(r)}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {diff.map((d) => (
            <tr key={d.option}>
              <th scope="row">
                <code>{d.option}</code>
              </th>
              {d.values.map((v, i) => (
                <td key={readable[i]!.jobId}>
                  <code>{v}</code>
                </td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** Compare runs: `#/compare?jobs=a,b,...` (up to 8): overlay, options that differ, galleries. */
export function CompareView(_props: ViewProps) {
  const { jobs, refusal } = comparedJobs(route.value.query.get("jobs"));
  const loaded = useLoad(() => Promise.all(jobs.map(loadRun)), [jobs.join(",")]);
  const [opened, setOpened] = useState<Opened | null>(null);
  const runs = loaded.data ?? [];
  const actions = <a href={href("runs")}>All runs</a>;
  if (refusal)
    return (
      <Page title="Compare runs" actions={actions}>
        <p class="error" role="alert">
          {refusal}
        </p>
      </Page>
    );
  if (!jobs.length)
    return (
      <Page title="Compare runs" actions={actions}>
        <p>
          No runs chosen: pick some on the <a href={href("runs")}>Runs</a> page.
        </p>
      </Page>
    );
  return (
    <Page title="Compare runs" actions={actions}>
      <ErrorNote error={loaded.error} />
      {loaded.loading && !loaded.data ? <p>Loading {jobs.length} runs…</p> : null}
      {runs.length ? (
        <>
          <Panel title="Runs">
            <ul class="compare-runs">
              {runs.map((r, i) => (
                <li key={r.jobId}>
                  <span class={`swatch swatch-${i % RUN_COLOURS.length}`} aria-hidden="true" />
                  <a href={href("jobs", r.jobId)}>{r.jobId}</a>
                  {r.run ? (
                    <span>
                      {" "}
                      {r.run.environment ?? "no environment"}, {r.run.status}, {formatDuration(r.run.duration_seconds)}, final loss{" "}
                      {r.run.final_loss === null ? "-" : Number(r.run.final_loss.toPrecision(4))}
                    </span>
                  ) : null}
                  <ErrorNote error={r.error} />
                </li>
              ))}
            </ul>
          </Panel>
          <Panel title="Loss and learning rate">
            <Overlay runs={runs} />
          </Panel>
          <Panel title="Options that differ">
            <OptionDiff runs={runs} />
          </Panel>
          {runs.length === 2 && runs[0]!.run && runs[1]!.run ? (
            <Panel title="Side by side">
              <SideBySide left={runs[0]!} right={runs[1]!} open={setOpened} />
            </Panel>
          ) : null}
          <Panel title="Validation images">
            {runs
              .filter((r) => r.run)
              .map((r) => (
                <RunGallery key={r.jobId} run={r} open={setOpened} />
              ))}
          </Panel>
        </>
      ) : null}
      <Lightbox opened={opened} onClose={() => setOpened(null)} />
    </Page>
  );
}
