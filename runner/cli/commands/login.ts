import type { Command } from "commander";

/** `jobs login`: not built yet (issue 15). */
export function addLogin(program: Command): void {
  program.command("login").description("(not built yet)");
}
