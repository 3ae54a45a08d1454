/**
 * The inference steps at which a validation preview is emitted: the first step, then
 * every `interval` steps, and the last step. An interval below 1 counts as 1 (every step).
 *
 * @example
 * previewSteps(20, 4); // [1, 5, 9, 13, 17, 20]
 */
export function previewSteps(total: number, interval: number): number[] {
  if (!Number.isInteger(total) || total < 1) return [];
  const every = Math.max(1, Math.floor(interval) || 1);
  const steps: number[] = [];
  for (let step = 1; step <= total; step += every) steps.push(step);
  if (steps[steps.length - 1] !== total) steps.push(total);
  return steps;
}
