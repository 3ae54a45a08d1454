import { closeSync, openSync, readSync } from "node:fs";

/*
 * Commands in: the runner appends JSON lines ({"command": "validation" | "checkpoint" | "stop"})
 * to the control file named by TRAINER_CONTROL_FILE; the trainer reads what is new after every
 * step. A file rather than stdin, so a trainer under a PTY (where stdin is the terminal) can
 * still be told what to do, and so commands survive the trainer being slow to look.
 */

export type Command = "validation" | "checkpoint" | "stop";
const COMMANDS = new Set<string>(["validation", "checkpoint", "stop"]);

export class ControlFile {
  private offset = 0;
  private pending = "";

  constructor(private readonly path: string | undefined) {}

  /** Commands appended since the last call, in order; unknown lines are returned as errors. */
  read(): { commands: Command[]; errors: string[] } {
    const commands: Command[] = [];
    const errors: string[] = [];
    if (!this.path) return { commands, errors };
    let fd: number;
    try {
      fd = openSync(this.path, "r");
    } catch {
      return { commands, errors }; // not created yet: nothing asked
    }
    try {
      const buffer = Buffer.alloc(64 * 1024);
      for (;;) {
        const n = readSync(fd, buffer, 0, buffer.length, this.offset);
        if (n === 0) break;
        this.offset += n;
        this.pending += buffer.subarray(0, n).toString("utf8");
      }
    } finally {
      closeSync(fd);
    }
    const lines = this.pending.split("\n");
    this.pending = lines.pop() ?? "";
    for (const line of lines.map((l) => l.trim()).filter(Boolean)) {
      try {
        const command = (JSON.parse(line) as { command?: unknown }).command;
        if (typeof command === "string" && COMMANDS.has(command)) commands.push(command as Command);
        else errors.push(`unknown command line: ${line}`);
      } catch {
        errors.push(`unreadable command line: ${line}`);
      }
    }
    return { commands, errors };
  }
}
