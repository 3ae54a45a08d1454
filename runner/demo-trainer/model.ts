/*
 * The demo trainer's model: linear regression on synthetic data, trained with mini-batch SGD.
 * Small enough to run anywhere on a CPU, real enough that the loss truly falls and a checkpoint
 * truly holds the weights that produce it.
 */

/** mulberry32: a tiny seeded PRNG, so a seed gives the same data and the same run. */
export function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export const FEATURES = 8;

export interface Dataset {
  x: number[][];
  y: number[];
}

/** Samples of y = w·x + b + noise for fixed hidden weights drawn from the seed. */
export function syntheticData(seed: number, samples = 512): Dataset {
  const rand = random(seed);
  const hidden = Array.from({ length: FEATURES }, () => rand() * 4 - 2);
  const bias = rand() * 2 - 1;
  const x: number[][] = [];
  const y: number[] = [];
  for (let i = 0; i < samples; i++) {
    const row = Array.from({ length: FEATURES }, () => rand() * 2 - 1);
    x.push(row);
    y.push(row.reduce((s, v, j) => s + v * hidden[j]!, bias) + (rand() - 0.5) * 0.05);
  }
  return { x, y };
}

export interface Weights {
  w: number[];
  b: number;
}

export const initialWeights = (): Weights => ({ w: Array(FEATURES).fill(0), b: 0 });

const predict = (m: Weights, row: number[]) => row.reduce((s, v, j) => s + v * m.w[j]!, m.b);

/** Mean squared error over the whole dataset. */
export function loss(m: Weights, data: Dataset): number {
  let total = 0;
  for (let i = 0; i < data.y.length; i++) total += (predict(m, data.x[i]!) - data.y[i]!) ** 2;
  return total / data.y.length;
}

/** One SGD step on the batch starting at `offset` (wrapping); returns the batch loss before the step. */
export function step(m: Weights, data: Dataset, offset: number, batchSize: number, learningRate: number): number {
  const gw = Array(FEATURES).fill(0) as number[];
  let gb = 0;
  let batchLoss = 0;
  for (let k = 0; k < batchSize; k++) {
    const i = (offset + k) % data.y.length;
    const err = predict(m, data.x[i]!) - data.y[i]!;
    batchLoss += err * err;
    for (let j = 0; j < FEATURES; j++) gw[j]! += (2 * err * data.x[i]![j]!) / batchSize;
    gb += (2 * err) / batchSize;
  }
  for (let j = 0; j < FEATURES; j++) m.w[j]! -= learningRate * gw[j]!;
  m.b -= learningRate * gb;
  return batchLoss / batchSize;
}
