import type { Command } from "commander";

/** `jobs cancel`: not built yet (issue 15). */
export function addCancel(program: Command): void {
  program.command("cancel").description("(not built yet)");
}
