import type { z } from "zod";
import type { JobEvent } from "../../../shared/schemas/events";
import { eventClock, eventText } from "../../../shared/event-line";
import { showControls } from "../../../shared/terminal-text";

/*
 * What the job view shows of a job's event stream, computed from its events alone (no DOM), so
 * that the rules (which image sources are rendered, how the ETA is estimated) are tested directly.
 */

export type StreamEvent = z.infer<typeof JobEvent>;

/** The log lines kept on the page: the newest ones, as `jobs logs` shows them (colour codes removed, other controls escaped). */
export const LOG_LINES = 200;
/** The preview images kept on the page (each a data URI of some kilobytes). */
export const PREVIEWS = 12;
/** The progress events the step rate (and so the ETA) is measured over. */
const RATE_WINDOW = 20;
/** Larger sources are not rendered: a preview is a small image, not a payload. */
const MAX_SOURCE_CHARS = 8_000_000;

const PREVIEW_SOURCE = /^data:image\/(?:png|gif|jpeg);base64,[A-Za-z0-9+/]*={0,2}$/;

/**
 * The image source a trainer's event may have rendered: only a base64 PNG, GIF or JPEG data URI
 * (a trainer's validation preview); anything else (`javascript:`, `data:text/html`, an SVG, a
 * remote URL) is null and not rendered at all.
 *
 * @example
 * safeImageSrc("data:image/png;base64,iVBORw0KGgo="); // the same string
 * safeImageSrc("javascript:alert(1)"); // null
 */
export function safeImageSrc(src: unknown): string | null {
  if (typeof src !== "string" || src.length > MAX_SOURCE_CHARS) return null;
  return PREVIEW_SOURCE.test(src) ? src : null;
}

export interface LogLine {
  index: number;
  clock: string;
  type: string;
  text: string;
}

export interface Preview {
  /** The event index and the image's place in it: a stable key. */
  key: string;
  src: string;
  alt: string;
  /** The prompt the trainer names, shown as text beside the image. */
  prompt: string | null;
}

export interface SavedCheckpoint {
  index: number;
  step: number | null;
  path: string | null;
  clock: string;
  onDemand: boolean;
}

/** The training as the events so far tell it. */
export interface TrainingState {
  /** The next event index expected: an event below it was seen already (a reconnect replays). */
  next: number;
  step: number | null;
  total: number | null;
  epoch: number | null;
  /** Plot data over steps: x, loss, learning rate (null where an event had none). */
  steps: number[];
  losses: (number | null)[];
  rates: (number | null)[];
  /** Recent progress as [step, ms since epoch], for the step rate. */
  recent: [number, number][];
  log: LogLine[];
  previews: Preview[];
  checkpoints: SavedCheckpoint[];
  /** validation.started events seen (scheduled and on demand). */
  validations: number;
  /** A stop was asked (training.stop_requested): a completed job was stopped, and may be retried. */
  stopRequested: boolean;
  /** From the events: when the job's last step came while it is marked stalled, null when not; undefined before any stall event. */
  stalledSince?: string | null;
}

export const EMPTY_TRAINING: TrainingState = {
  next: 0,
  step: null,
  total: null,
  epoch: null,
  steps: [],
  losses: [],
  rates: [],
  recent: [],
  log: [],
  previews: [],
  checkpoints: [],
  validations: 0,
  stopRequested: false,
};

const num = (value: unknown): number | null => (typeof value === "number" && Number.isFinite(value) ? value : null);
const str = (value: unknown): string | null => (typeof value === "string" && value !== "" ? value : null);
const record = (value: unknown): Record<string, unknown> =>
  value && typeof value === "object" && !Array.isArray(value) ? (value as Record<string, unknown>) : {};

function previewsOf(event: StreamEvent): Preview[] {
  const data = record(event.data);
  const label = str(data.step_label) ?? (num(data.step) !== null ? String(data.step) : null);
  const alt =
    event.type === "validation.image"
      ? `validation preview, step ${label ?? "?"}`
      : `validation image${num(data.step) !== null ? `, training step ${data.step}` : ""}`;
  const media = [...(Array.isArray(event.images) ? event.images : []), ...(Array.isArray(event.videos) ? event.videos : [])];
  const previews: Preview[] = [];
  media.forEach((item, i) => {
    const src = safeImageSrc(record(item).src);
    if (src) previews.push({ key: `${event.index}.${i}`, src, alt, prompt: str(data.prompt) ?? str(event.body) });
  });
  return previews;
}

/**
 * The state after `events` (in index order; those already seen are skipped). Answers a new object
 * with new arrays where something changed, so a view re-renders and its plot takes the new points.
 *
 * @example
 * let state = applyEvents(EMPTY_TRAINING, [{ index: 0, timestamp: "...", type: "training.progress", data: { step: 1, total_steps: 40, loss: 0.9 } }]);
 * state.step; // 1
 */
export function applyEvents(state: TrainingState, events: StreamEvent[]): TrainingState {
  const fresh = events.filter((e) => e.index >= state.next);
  if (!fresh.length) return state;
  const s: TrainingState = {
    ...state,
    steps: [...state.steps],
    losses: [...state.losses],
    rates: [...state.rates],
    recent: [...state.recent],
    log: [...state.log],
    previews: [...state.previews],
    checkpoints: [...state.checkpoints],
  };
  for (const event of fresh) {
    s.next = event.index + 1;
    const data = record(event.data);
    if (event.type === "training.progress" || event.type === "training.started") s.total = num(data.total_steps) ?? s.total;
    if (event.type === "training.stalled") s.stalledSince = str(data.since) ?? event.timestamp;
    if (event.type === "training.stall_cleared") s.stalledSince = null;
    if (event.type === "training.progress") {
      if (s.stalledSince) s.stalledSince = null;
      const step = num(data.step);
      if (step === null) continue;
      // A retry resumes from a checkpoint: its steps replace the ones the failed attempt plotted.
      while (s.steps.length && s.steps[s.steps.length - 1]! >= step) {
        s.steps.pop();
        s.losses.pop();
        s.rates.pop();
      }
      s.steps.push(step);
      s.losses.push(num(data.loss));
      s.rates.push(num(data.learning_rate) ?? num(data.lr));
      s.step = step;
      s.epoch = num(data.epoch) ?? s.epoch;
      const at = Date.parse(event.timestamp);
      if (Number.isFinite(at)) {
        if (s.recent.length && s.recent[s.recent.length - 1]![0] >= step) s.recent = [];
        s.recent.push([step, at]);
        if (s.recent.length > RATE_WINDOW) s.recent.shift();
      }
      continue; // every step in the log would bury everything else; the progress bar shows it
    }
    if (event.type === "validation.started") s.validations++;
    if (event.type === "training.stop_requested") s.stopRequested = true;
    if (event.type === "validation.image" || event.type === "validation.completed") s.previews.push(...previewsOf(event));
    if (event.type === "checkpoint.saved") {
      const removed = Array.isArray(data.removed) ? data.removed.filter((p): p is string => typeof p === "string") : [];
      s.checkpoints = s.checkpoints.filter((c) => c.path === null || !removed.includes(c.path));
      s.checkpoints.push({
        index: event.index,
        step: num(data.step),
        path: str(data.path),
        clock: eventClock(event.timestamp),
        onDemand: data.on_demand === true,
      });
    }
    s.log.push({ index: event.index, clock: eventClock(event.timestamp), type: showControls(event.type), text: eventText(event) });
  }
  if (s.log.length > LOG_LINES) s.log = s.log.slice(-LOG_LINES);
  if (s.previews.length > PREVIEWS) s.previews = s.previews.slice(-PREVIEWS);
  return s;
}

/** Steps per second over the recent progress events; null until two of them are some time apart. */
export function stepRate(state: TrainingState): number | null {
  const first = state.recent[0];
  const last = state.recent[state.recent.length - 1];
  if (!first || !last || last[1] <= first[1] || last[0] <= first[0]) return null;
  return (last[0] - first[0]) / ((last[1] - first[1]) / 1000);
}

/**
 * Seconds left at the recent step rate; null when unknown.
 *
 * @example
 * etaSeconds({ ...EMPTY_TRAINING, step: 10, total: 40, recent: [[0, 0], [10, 5000]] }); // 15
 */
export function etaSeconds(state: TrainingState): number | null {
  const rate = stepRate(state);
  if (rate === null || state.step === null || state.total === null) return null;
  return Math.max(0, (state.total - state.step) / rate);
}
