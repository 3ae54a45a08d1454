import type { Command } from "commander";

/** `jobs submit`: not built yet (issue 15). */
export function addSubmit(program: Command): void {
  program.command("submit").description("(not built yet)");
}
