import type { Command } from "commander";

/** `jobs logs`: not built yet (issue 15). */
export function addLogs(program: Command): void {
  program.command("logs").description("(not built yet)");
}
