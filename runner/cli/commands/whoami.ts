import type { Command } from "commander";

/** `jobs whoami`: not built yet (issue 15). */
export function addWhoami(program: Command): void {
  program.command("whoami").description("(not built yet)");
}
