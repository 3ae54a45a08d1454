/*
 * What the compare view (#/compare?jobs=a,b) computes from the runs API's answers, without the
 * DOM, so its rules are tested directly: which runs were asked for, the overlay's aligned data
 * and smoothing, the options that differ, and the gallery's grid.
 */

/** The most runs compared at once. */
export const MAX_COMPARED = 8;

/** One line colour per run, legible on the light and the dark background alike. */
export const RUN_COLOURS = ["#3b82f6", "#f97316", "#22c55e", "#a855f7", "#ef4444", "#14b8a6", "#eab308", "#ec4899"];

/**
 * The job ids of `jobs=a,b,...`: trimmed, blanks and repeats dropped; more than MAX_COMPARED is
 * refused with a message saying so.
 *
 * @example
 * comparedJobs("local-a, local-b,,local-a"); // { jobs: ["local-a", "local-b"], refusal: null }
 */
export function comparedJobs(param: string | null): { jobs: string[]; refusal: string | null } {
  const jobs = [
    ...new Set(
      (param ?? "")
        .split(",")
        .map((j) => j.trim())
        .filter(Boolean),
    ),
  ];
  if (jobs.length > MAX_COMPARED)
    return {
      jobs: [],
      refusal: `At most ${MAX_COMPARED} runs can be compared at once; ${jobs.length} were asked for. Pick ${MAX_COMPARED} or fewer on the Runs page.`,
    };
  return { jobs, refusal: null };
}

/**
 * An exponential moving average (the smoothing slider): `weight` 0 is the raw series, towards 1
 * smoother. Debiased as TensorBoard's is, so the start does not lean towards zero; a gap (null)
 * stays a gap and does not reset the average.
 *
 * @example
 * smooth([1, 0, 0], 0.5); // [1, 0.333..., 0.142...]
 */
export function smooth(values: (number | null)[], weight: number): (number | null)[] {
  if (weight <= 0) return values;
  let last = 0;
  let count = 0;
  return values.map((value) => {
    if (value === null) return null;
    last = last * weight + (1 - weight) * value;
    count++;
    return last / (1 - weight ** count);
  });
}

export interface SeriesPoint {
  step: number;
  seconds: number;
  loss: number | null;
  lr: number | null;
}

/**
 * uPlot's aligned data for several runs over one x axis (step, or seconds since start): the
 * union of their x values in order, each run's value where it has one, null where not. A run
 * with several points at one x (by time: progress events stored in one batch share their stored
 * time, as after a runner's outbox is replayed) keeps every one of them, in order, at that x
 * (uPlot takes repeated x values): dropping all but the last would hide points from the plot
 * and from its smoothing.
 *
 * @example
 * overlay([[{ step: 1, seconds: 0, loss: 1, lr: 0.1 }], [{ step: 2, seconds: 1, loss: 2, lr: 0.1 }]], "step", "loss");
 * // [[1, 2], [1, null], [null, 2]]
 */
export function overlay(runs: SeriesPoint[][], x: "step" | "seconds", y: "loss" | "lr"): [number[], ...(number | null)[][]] {
  // How many rows each x needs: the most points any one run has there.
  const rowsAt = new Map<number, number>();
  for (const points of runs) {
    const counts = new Map<number, number>();
    for (const p of points) counts.set(p[x], (counts.get(p[x]) ?? 0) + 1);
    for (const [value, count] of counts) rowsAt.set(value, Math.max(rowsAt.get(value) ?? 0, count));
  }
  const xs: number[] = [];
  const firstRow = new Map<number, number>();
  for (const value of [...rowsAt.keys()].sort((a, b) => a - b)) {
    firstRow.set(value, xs.length);
    for (let i = 0; i < rowsAt.get(value)!; i++) xs.push(value);
  }
  const columns = runs.map((points) => {
    const column: (number | null)[] = xs.map(() => null);
    const used = new Map<number, number>();
    for (const p of points) {
      const k = used.get(p[x]) ?? 0;
      used.set(p[x], k + 1);
      column[firstRow.get(p[x])! + k] = p[y];
    }
    return column;
  });
  return [xs, ...columns];
}

const shown = (value: unknown): string => (value === undefined ? "(not set)" : typeof value === "string" ? value : JSON.stringify(value));

/**
 * The options whose values are not the same in every run (an option one run lacks differs), in
 * name order, each as one text per run.
 *
 * @example
 * differingOptions([{ "--learning_rate": 1e-4, "--seed": 1 }, { "--learning_rate": 3e-4, "--seed": 1 }]);
 * // [{ option: "--learning_rate", values: ["0.0001", "0.0003"] }]
 */
export function differingOptions(configs: (Record<string, unknown> | null)[]): { option: string; values: string[] }[] {
  const names = [...new Set(configs.flatMap((c) => Object.keys(c ?? {})))].sort();
  return names
    .map((option) => ({ option, values: configs.map((c) => shown(c?.[option])) }))
    .filter(({ values }) => values.some((v) => v !== values[0]));
}

export interface GalleryImage {
  n: number;
  step: number | null;
  prompt: string | null;
  index: number;
  url: string;
}

/** A run's images as a grid: one row per prompt, one column per step, each cell that prompt's images at that step. */
export interface Gallery {
  prompts: (string | null)[];
  steps: (number | null)[];
  cell: (prompt: string | null, step: number | null) => GalleryImage[];
}

const cellKey = (prompt: string | null, step: number | null) => JSON.stringify([prompt, step]);

/**
 * The grid of prompt (rows, in the order they first came) by step (columns, ascending; no step last).
 *
 * @example
 * gallery(images).cell("a cat", 4); // the images of "a cat" at step 4
 */
export function gallery(images: GalleryImage[]): Gallery {
  const prompts = [...new Set(images.map((i) => i.prompt))];
  const steps = [...new Set(images.map((i) => i.step))].sort((a, b) => (a === null ? 1 : b === null ? -1 : a - b));
  const cells = new Map<string, GalleryImage[]>();
  for (const image of images) {
    const key = cellKey(image.prompt, image.step);
    cells.set(key, [...(cells.get(key) ?? []), image]);
  }
  return { prompts, steps, cell: (prompt, step) => cells.get(cellKey(prompt, step)) ?? [] };
}

/**
 * Two runs' images paired for a side by side: by prompt, step and place, in the first run's
 * order then the second's leftovers; a side without that image is null.
 *
 * @example
 * pairImages(a, b); // [{ prompt: "a cat", step: 4, index: 0, left: a[0], right: b[0] }]
 */
export function pairImages(left: GalleryImage[], right: GalleryImage[]) {
  const key = (i: GalleryImage) => JSON.stringify([i.prompt, i.step, i.index]);
  const rights = new Map(right.map((i) => [key(i), i]));
  const pairs = left.map((l) => {
    const r = rights.get(key(l)) ?? null;
    rights.delete(key(l));
    return { prompt: l.prompt, step: l.step, index: l.index, left: l as GalleryImage | null, right: r };
  });
  for (const r of rights.values()) pairs.push({ prompt: r.prompt, step: r.step, index: r.index, left: null, right: r });
  return pairs;
}
