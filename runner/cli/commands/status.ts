import type { Command } from "commander";

/** `jobs status`: not built yet (issue 15). */
export function addStatus(program: Command): void {
  program.command("status").description("(not built yet)");
}
