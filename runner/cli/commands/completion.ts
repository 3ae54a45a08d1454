import type { Command } from "commander";

/** `jobs completion`: not built yet (issue 15). */
export function addCompletion(program: Command): void {
  program.command("completion").description("(not built yet)");
}
