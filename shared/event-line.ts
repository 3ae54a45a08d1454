/** How an event reads in one line, shared by the `jobs` CLI (logs) and the dashboard (a job's log). */
import type { z } from "zod";
import type { JobEvent } from "./schemas/events";
import { showControls, stripColour } from "./terminal-text";

export type Event = z.infer<typeof JobEvent>;

const str = (value: unknown): string | undefined => (typeof value === "string" && value !== "" ? value : undefined);
const num = (value: unknown): number | undefined => (typeof value === "number" && Number.isFinite(value) ? value : undefined);
const record = (value: unknown): Record<string, unknown> =>
  value && typeof value === "object" && !Array.isArray(value) ? (value as Record<string, unknown>) : {};

/** A loss as people read it: four decimals, or four significant digits when it is tiny. */
function formatLoss(loss: number): string {
  return Math.abs(loss) >= 0.001 || loss === 0 ? loss.toFixed(4) : loss.toPrecision(4);
}

/** "1 image", "3 images": media are data URIs, which would flood a terminal. */
function mediaCount(event: Event): string | undefined {
  const count = (value: unknown, one: string) => {
    const n = Array.isArray(value) ? value.length : 0;
    return n ? `${n} ${one}${n === 1 ? "" : "s"}` : undefined;
  };
  const parts = [count(event.images, "image"), count(event.videos, "video")].filter(Boolean);
  return parts.length ? parts.join(", ") : undefined;
}

/**
 * What an event says, in one line: a log line's text, "step S/T loss L" for progress, the title
 * (and path, or how many images) for the rest. Never a data URI, never a newline; colour codes
 * removed and every other control shown as a `\u00XX` escape (terminal-text.ts).
 *
 * @example
 * eventText({ index: 3, timestamp: "...", type: "training.progress", data: { step: 3, total_steps: 50, loss: 0.41 } });
 * // "step 3/50 loss 0.4100"
 */
export function eventText(event: Event): string {
  const data = record(event.data);
  let text: string | undefined;
  if (event.type === "training.progress" && num(data.step) !== undefined) {
    const total = num(data.total_steps);
    const loss = num(data.loss);
    text = `step ${data.step}${total !== undefined ? `/${total}` : ""}${loss !== undefined ? ` loss ${formatLoss(loss)}` : ""}`;
  } else if (event.type === "checkpoint.saved") {
    const step = num(data.step);
    text = str(event.title) ?? (step !== undefined ? `checkpoint at step ${step}` : "checkpoint saved");
    if (str(data.path)) text += ` (${data.path})`;
  } else {
    text = str(event.message) ?? str(event.title) ?? str(event.line) ?? str(data.message) ?? str(event.body);
    const media = mediaCount(event);
    if (media) text = text ? `${text} (${media})` : media;
    text ??= Object.keys(data).length ? JSON.stringify(data) : "";
  }
  // A trainer's line may carry a carriage return or escape codes of its own terminal.
  return showControls(
    stripColour(text)
      .replace(/[\r\n]+/g, " ")
      .trim(),
  );
}

/** The event's time as HH:MM:SS in this machine's time zone ("--:--:--" when it has none). */
export function eventClock(timestamp: unknown): string {
  const date = new Date(typeof timestamp === "string" ? timestamp : NaN);
  if (Number.isNaN(date.getTime())) return "--:--:--";
  const pad = (n: number) => String(n).padStart(2, "0");
  return `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`;
}

/**
 * An event as `jobs logs` prints it: `<HH:MM:SS> <type> <text>`, the type's controls shown as escapes too.
 *
 * @example
 * eventLine({ index: 0, timestamp: "2026-01-02T10:11:12Z", type: "log", message: "loading model" });
 * // "10:11:12 log loading model" (in UTC)
 */
export function eventLine(event: Event): string {
  const text = eventText(event);
  return `${eventClock(event.timestamp)} ${showControls(event.type)}${text ? ` ${text}` : ""}`;
}
