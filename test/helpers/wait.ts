/**
 * Polls `probe` (sync or async) until it returns something truthy, and returns that; after
 * `timeoutMs` it throws naming `what`, with `context()` (say, a process's output) appended.
 *
 * @example
 * const job = await until("the job to start", async () => (await read(id)).status === "running" && read(id));
 */
export async function until<T>(
  what: string,
  probe: () => T | undefined | null | false | Promise<T | undefined | null | false>,
  options: { timeoutMs?: number; everyMs?: number; context?: () => string } = {},
): Promise<T> {
  const deadline = Date.now() + (options.timeoutMs ?? 20_000);
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${options.context ? `\n${options.context()}` : ""}`);
    await new Promise((r) => setTimeout(r, options.everyMs ?? 50));
  }
}
