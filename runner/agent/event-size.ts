import { createRequire } from "node:module";
import type { PNG as PngClass } from "pngjs";
import { MAX_EVENT_BYTES } from "../../shared/schemas/events";
import type { TrainerEvent } from "./trainer-events";

/*
 * Every event a runner sends fits what the edge stores (MAX_EVENT_BYTES, 512 KiB of JSON): the
 * edge refuses a batch holding a larger one, and a refused batch is lost. What makes an event
 * large is a trainer's pictures - SimpleTuner's validation images at 1024 px are 1 to 2 MB of PNG -
 * so those are scaled down (halved until they fit: the preview still shows; the full image stays
 * in the job's output directory), and whatever still does not fit is replaced by a note saying so.
 */

/** Room kept below the edge's limit for the runner's own framing of the event. */
const LIMIT = MAX_EVENT_BYTES - 4 * 1024;
/** The smallest width a picture is scaled down to before it is left out instead. */
const MIN_WIDTH = 32;

type Media = { src: string; mime_type: string };

// Loaded with the first picture too large to send: most runners never meet one, and pngjs costs
// the idle runner memory (issue 31).
let pngjs: typeof PngClass | undefined;
const png = () => (pngjs ??= (createRequire(import.meta.url)("pngjs") as typeof import("pngjs")).PNG);

const size = (event: TrainerEvent) => JSON.stringify(event).length;

/** A PNG data URI at half its width and height (each pixel the mean of four); null for anything that is not one. */
function halve(src: string): string | null {
  const match = /^data:image\/png;base64,(.*)$/s.exec(src);
  if (!match) return null;
  let image: PngClass;
  try {
    image = png().sync.read(Buffer.from(match[1]!, "base64"));
  } catch {
    return null;
  }
  if (image.width < MIN_WIDTH * 2) return null;
  const width = Math.floor(image.width / 2);
  const height = Math.max(1, Math.floor(image.height / 2));
  const out = new (png())({ width, height });
  for (let y = 0; y < height; y++)
    for (let x = 0; x < width; x++)
      for (let c = 0; c < 4; c++) {
        const at = (dx: number, dy: number) => image.data[((2 * y + dy) * image.width + (2 * x + dx)) * 4 + c]!;
        out.data[(y * width + x) * 4 + c] = Math.round((at(0, 0) + at(1, 0) + at(0, 1) + at(1, 1)) / 4);
      }
  return `data:image/png;base64,${png().sync.write(out).toString("base64")}`;
}

/**
 * The event as the edge will take it: unchanged when it fits; else its PNG pictures halved,
 * largest first, until it fits; else without its pictures (`data.media_left_out` says how many);
 * else, for a huge text or data, its type, title and level with `data.truncated` and the first
 * 4,000 characters of its message.
 *
 * @example
 * fitEvent({ type: "validation.image", images: [{ src: "data:image/png;base64,<2 MB>", mime_type: "image/png" }] });
 * // the same event with a 512 px picture
 */
export function fitEvent(event: TrainerEvent): TrainerEvent {
  if (size(event) <= LIMIT) return event;
  const fitted: TrainerEvent = { ...event };
  const lists = (["images", "videos"] as const).filter((key) => Array.isArray(event[key]));
  for (const key of lists) fitted[key] = [...(event[key] as Media[])];
  const shrinkable = new Set<Media>();
  for (const key of lists) for (const item of fitted[key] as Media[]) shrinkable.add(item);
  while (size(fitted) > LIMIT && shrinkable.size) {
    const largest = [...shrinkable].sort((a, b) => b.src.length - a.src.length)[0]!;
    shrinkable.delete(largest);
    const smaller = halve(largest.src);
    if (!smaller) continue;
    const replacement = { ...largest, src: smaller };
    for (const key of lists) {
      const items = fitted[key] as Media[];
      const i = items.indexOf(largest);
      if (i >= 0) items[i] = replacement;
    }
    shrinkable.add(replacement);
  }
  if (size(fitted) <= LIMIT) return fitted;
  const count = lists.reduce((n, key) => n + (fitted[key] as Media[]).length, 0);
  const data = { ...((event.data ?? {}) as Record<string, unknown>), media_left_out: count };
  const withoutMedia: TrainerEvent = { ...fitted, data };
  for (const key of lists) withoutMedia[key] = [];
  if (count && size(withoutMedia) <= LIMIT) return withoutMedia;
  const text = (value: unknown) => (typeof value === "string" ? value.slice(0, 4000) : undefined);
  return {
    type: event.type,
    ...(text(event.title) !== undefined ? { title: text(event.title) } : {}),
    ...(text(event.message) !== undefined ? { message: text(event.message) } : {}),
    ...(typeof event.level === "string" ? { level: event.level } : {}),
    data: { truncated: true, bytes: size(event) },
  };
}
