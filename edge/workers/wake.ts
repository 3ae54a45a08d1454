import type { Context } from "hono";
import type { AppEnv } from "../app-env";

/**
 * Tells a worker's runner to ask for work now (a new assignment or command is waiting). Until the
 * worker channel arrives, runners ask on their own every second; this is where it will plug in.
 */
export async function wakeWorker(_c: Context<AppEnv>, _workerId: number): Promise<void> {}
