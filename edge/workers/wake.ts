import type { Context } from "hono";
import type { AppEnv } from "../app-env";
import { channelOf } from "../jobs/objects";
import type { TrainerCommand } from "../../shared/trainer-commands";

/**
 * Tells a worker's runner to ask for work now (an assignment or a command is waiting), handing it
 * `commands` at once where there are new ones. A wake-up that cannot be delivered is only logged:
 * the runner still asks on its own schedule, and gets the commands with its heartbeat's answer.
 */
export async function wakeWorker(
  c: Context<AppEnv>,
  workerId: number,
  commands: { id: number; job_id: string; command: TrainerCommand }[] = [],
): Promise<void> {
  await channelOf(c.env, workerId)
    .notify(commands)
    .catch((error: unknown) => c.get("log").warning("could not wake the worker's runner", { worker_id: workerId, error: String(error) }));
}
