import { Command, CommanderError, Option } from "commander";
import { version } from "../../package.json";
import { addApprovals } from "./commands/approvals";
import { addCancel } from "./commands/cancel";
import { addComplete } from "./commands/complete";
import { addCompletion } from "./commands/completion";
import { addCost } from "./commands/cost";
import { addDatasets } from "./commands/datasets";
import { addEnv } from "./commands/env";
import { addGpus } from "./commands/gpus";
import { addList } from "./commands/list";
import { addLogin } from "./commands/login";
import { addLogs } from "./commands/logs";
import { addNotifications } from "./commands/notifications";
import { addOpen } from "./commands/open";
import { addPriority } from "./commands/priority";
import { addRetry } from "./commands/retry";
import { addStatus } from "./commands/status";
import { addSubmit } from "./commands/submit";
import { addWhoami } from "./commands/whoami";
import { EXIT, FORMATS, Output, reportError, UsageError, type Format } from "./output";

/** The `jobs` program: global options, then one module per command (runner/cli/commands/). */
export function buildProgram(): Command {
  const program = new Command("jobs")
    .description("Submit, list, follow and cancel training jobs on a training service.")
    .version(version, "-V, --version")
    .addOption(new Option("--url <url>", "the service's address (else SERVICE_URL, else the config file)"))
    .addOption(new Option("--api-key <key>", "your API key (else SERVICE_API_KEY, else the config file)"))
    .addOption(
      new Option("--format <format>", "output: a table for people, json for scripts, csv (jobs cost)").choices(FORMATS).default("table"),
    )
    .configureHelp({ showGlobalOptions: true, sortSubcommands: false })
    .showHelpAfterError("(add --help for usage)")
    .addHelpText(
      "after",
      "\nExit codes: 0 success, 1 the service refused or failed (its detail on stderr), 2 a usage error.\nConfig: --url/--api-key, then SERVICE_URL/SERVICE_API_KEY, then the file `jobs login` writes.",
    );
  addSubmit(program);
  addList(program);
  addStatus(program);
  addCancel(program);
  addRetry(program);
  addLogs(program);
  addApprovals(program);
  addPriority(program);
  addGpus(program);
  addCost(program);
  addNotifications(program);
  addOpen(program);
  addEnv(program);
  addDatasets(program);
  addLogin(program);
  addWhoami(program);
  addCompletion(program);
  addComplete(program);
  // Every command (and the program) exits through main, not process.exit, with our exit codes.
  const exitOverride = (command: Command) => {
    command.exitOverride();
    command.commands.forEach(exitOverride);
  };
  exitOverride(program);
  return program;
}

/**
 * Runs the CLI with `argv` (the arguments after `jobs`) and returns the exit code. Errors are
 * written to stderr here: a command's action throws, it never exits the process itself.
 */
export async function main(argv: string[]): Promise<number> {
  const program = buildProgram();
  const out = new Output(formatIn(argv));
  if (out.json) program.configureOutput({ writeErr: () => {}, outputError: () => {} });
  try {
    await program.parseAsync(argv, { from: "user" });
    return EXIT.ok;
  } catch (error) {
    if (error instanceof CommanderError) {
      if (error.exitCode === 0) return EXIT.ok; // --help, --version
      // commander has already written its message (in text mode); JSON mode writes it here.
      if (out.json) reportError(new UsageError(error.message.replace(/^error: /, "")), out);
      return EXIT.usage;
    }
    return reportError(error, out);
  }
}

/** The --format asked for, read before parsing so that parse errors are reported in it too. */
function formatIn(argv: string[]): Format {
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--") break;
    const value = argv[i] === "--format" ? argv[i + 1] : argv[i]!.startsWith("--format=") ? argv[i]!.slice(9) : undefined;
    if (value === "json") return "json";
  }
  return "table";
}
