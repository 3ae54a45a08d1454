import type { TestStack } from "./stack";

/*
 * A box (a worker, local or remote) registered the way a runner registers it, for tests that
 * need GPUs the Scheduler can hand out without a runner process serving them.
 */

/** `n` GPUs of model `name`, as a worker registers them. */
export const gpuInventory = (n: number, name: string) => Array.from({ length: n }, (_, index) => ({ index, name, memory_mb: 81920 }));

/** Creates the worker `name` (as the admin) and registers it with `gpus`; returns its id and token. */
export async function registerWorker(
  t: TestStack,
  adminKey: string,
  name: string,
  role: "local" | "remote",
  gpus: unknown[],
  labels: Record<string, string> = {},
): Promise<{ id: number; token: string }> {
  const created = await t.call("POST", "/api/admin/workers", { json: { name }, auth: { key: adminKey } });
  if (created.status !== 201) throw new Error(`worker ${name}: ${created.status} ${created.text}`);
  const token = created.body.token as string;
  const registered = await t.call("POST", "/api/workers/register", { json: { role, labels, gpus }, auth: { bearer: token } });
  if (registered.status !== 200) throw new Error(`register ${name}: ${registered.status} ${registered.text}`);
  return { id: created.body.id as number, token };
}

/** As registerWorker, returning only the token. */
export async function registerBox(...args: Parameters<typeof registerWorker>): Promise<string> {
  return (await registerWorker(...args)).token;
}

/**
 * One GPU's health as a runner sends it with a heartbeat (`gpu_health`): a healthy, idle-ish GPU
 * of 80 GiB unless `over` says otherwise.
 *
 * @example
 * healthSample(1, { probe_error: "GPU is lost" }) // quarantines GPU 1 in that heartbeat
 */
export const healthSample = (index: number, over: Record<string, unknown> = {}) => ({
  index,
  utilization_percent: 35,
  memory_used_mb: 1024,
  memory_total_mb: 81920,
  temperature_c: 45,
  ecc_uncorrected_volatile: 0,
  retired_pages_pending: false,
  probe_error: null,
  xids: [],
  ...over,
});
