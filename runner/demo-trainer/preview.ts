import { PNG } from "pngjs";
import { random, type Weights } from "./model";

/**
 * A validation image as a PNG data URI: a pattern drawn from the model's weights, blended with
 * noise that fades as the inference steps advance, so the previews of one validation visibly
 * "denoise" towards the final image. Sizes above 256 px are scaled down to keep events small.
 */
export function renderPreview(weights: Weights, step: number, totalSteps: number, resolution: [number, number], seed: number): string {
  const scale = Math.min(1, 256 / Math.max(resolution[0], resolution[1]));
  const width = Math.max(1, Math.round(resolution[0] * scale));
  const height = Math.max(1, Math.round(resolution[1] * scale));
  const png = new PNG({ width, height });
  const noise = random(seed * 7919 + step);
  const clarity = totalSteps <= 1 ? 1 : (step - 1) / (totalSteps - 1);
  const w = weights.w;
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const u = x / width;
      const v = y / height;
      const channel = (k: number) => {
        const a = w[k % w.length] ?? 0;
        const b = w[(k + 3) % w.length] ?? 0;
        const clean = 0.5 + 0.5 * Math.sin(6 * (a * u + b * v) + weights.b + k);
        return Math.round(255 * (clarity * clean + (1 - clarity) * noise()));
      };
      const i = (y * width + x) * 4;
      png.data[i] = channel(0);
      png.data[i + 1] = channel(1);
      png.data[i + 2] = channel(2);
      png.data[i + 3] = 255;
    }
  }
  return `data:image/png;base64,${PNG.sync.write(png).toString("base64")}`;
}

/** `--validation_resolution`: "<W>x<H>" or a single number for a square. */
export function parseResolution(raw: string | undefined): [number, number] {
  if (!raw) return [64, 64];
  const m = /^(\d+)(?:x(\d+))?$/.exec(raw.trim());
  if (!m) throw new Error(`--validation_resolution must look like 1024x1024, not ${JSON.stringify(raw)}`);
  const w = Number(m[1]);
  const h = m[2] === undefined ? w : Number(m[2]);
  if (w < 1 || h < 1) throw new Error(`--validation_resolution must be positive, not ${JSON.stringify(raw)}`);
  return [w, h];
}
