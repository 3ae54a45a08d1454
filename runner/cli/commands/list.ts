import type { Command } from "commander";

/** `jobs list`: not built yet (issue 15). */
export function addList(program: Command): void {
  program.command("list").description("(not built yet)");
}
