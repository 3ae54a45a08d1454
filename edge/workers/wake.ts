import type { Context } from "hono";
import type { AppEnv } from "../app-env";
import { channelOf } from "../jobs/objects";

/**
 * Tells a worker's runner to ask for work now (an assignment or a command is waiting). A wake-up
 * that cannot be delivered is only logged: the runner still asks on its own schedule.
 */
export async function wakeWorker(c: Context<AppEnv>, workerId: number): Promise<void> {
  await channelOf(c.env, workerId)
    .notify()
    .catch((error: unknown) => c.get("log").warning("could not wake the worker's runner", { worker_id: workerId, error: String(error) }));
}
