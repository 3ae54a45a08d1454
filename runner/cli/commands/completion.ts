import { Argument, type Command } from "commander";
import { bashCompletion, programSpec, zshCompletion } from "../completion";
import { outputOf } from "../context";

const SHELLS = ["bash", "zsh"] as const;

/** `jobs completion`: a shell completion script generated from the program's own commands and options. */
export function addCompletion(program: Command): void {
  program
    .command("completion")
    .description("Print a shell completion script (commands, options and their values) for jobs and training-jobs.")
    .addArgument(new Argument("<shell>", "the shell").choices(SHELLS))
    .addHelpText(
      "after",
      [
        "",
        "`jobs` is also a shell builtin, so run the tool as `training-jobs` (npx training-jobs), or alias jobs=training-jobs;",
        "the script completes both names.",
        "",
        "Install:",
        "  bash: source <(jobs completion bash)                 (add it to ~/.bashrc)",
        '  zsh:  jobs completion zsh > "${fpath[1]}/_jobs"      (a directory of $fpath; then restart zsh)',
        "        or source <(jobs completion zsh) in ~/.zshrc, after compinit",
        "",
        "Example:",
        "  training-jobs completion bash > ~/.local/share/bash-completion/completions/training-jobs",
      ].join("\n"),
    )
    .action((shell: (typeof SHELLS)[number], _options: unknown, command: Command) => {
      let root = command;
      while (root.parent) root = root.parent;
      const spec = programSpec(root);
      // A script, not data to format: the same text with --format json.
      outputOf(command).line((shell === "bash" ? bashCompletion(spec) : zshCompletion(spec)).trimEnd());
    });
}
