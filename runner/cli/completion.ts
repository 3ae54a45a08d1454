import type { Command, Option } from "commander";
import type { CompletionKind } from "./commands/complete";

/** The names the completion registers for: package.json `bin` (and `alias jobs=training-jobs`). */
export const COMPLETED_NAMES = ["jobs", "training-jobs"] as const;

/** One option as completion sees it. */
interface OptionSpec {
  flags: string[];
  description: string;
  /** It takes a value (the next word, or after `=`). */
  takesValue: boolean;
  /** The values it takes, when they are a fixed list. */
  choices: string[];
}

/** One command as completion sees it: its options (the program's global ones included) and first argument's choices. */
interface CommandSpec {
  name: string;
  description: string;
  options: OptionSpec[];
  argChoices: string[];
  /** What the service lists for its first argument (`jobs __complete <kind>`), or null. */
  argKind: CompletionKind | null;
  /** Its subcommands (`env show`) with what their first argument completes from. */
  subcommands: { name: string; argKind: CompletionKind | null }[];
}

/** What the service lists for a command's first argument: job ids for a `job_id`, environment names for a `config` or an `env` command's `name`. */
function argKindOf(command: Command): CompletionKind | null {
  const first = command.registeredArguments[0]?.name();
  if (first === "job_id") return "jobs";
  if (first === "config" || (first === "name" && command.parent?.name() === "env")) return "environments";
  return null;
}

/** What a completion script is generated from: the program's options and its commands. */
export interface ProgramSpec {
  options: OptionSpec[];
  commands: CommandSpec[];
}

function optionSpec(option: Option): OptionSpec {
  return {
    flags: [option.short, option.long].filter((flag): flag is string => Boolean(flag)),
    description: option.description,
    takesValue: option.required || option.optional,
    choices: option.argChoices ?? [],
  };
}

/**
 * Reads the commander program tree: every visible command with its options, the program's
 * options (accepted after a command too) and the help option and command commander adds.
 *
 * @example
 * const spec = programSpec(buildProgram());
 * spec.commands.map((c) => c.name); // ["submit", "list", ..., "help"]
 */
export function programSpec(program: Command): ProgramSpec {
  const help = program.createHelp();
  const globals = help.visibleOptions(program).map(optionSpec);
  const commands = help.visibleCommands(program).map((command) => {
    const own = command.createHelp().visibleOptions(command).map(optionSpec);
    const ownFlags = new Set(own.flatMap((o) => o.flags));
    // The program's options (not -V/--version) are accepted after any command.
    const inherited = globals.filter((o) => !o.flags.includes("--version") && !o.flags.some((flag) => ownFlags.has(flag)));
    const firstArgument = command.registeredArguments[0];
    return {
      name: command.name(),
      description: command.summary() || command.description(),
      options: [...own, ...inherited],
      // `help` and a command with subcommands (`env`) take a command's name first.
      argChoices:
        command.name() === "help"
          ? help.visibleCommands(program).map((c) => c.name())
          : command.commands.length
            ? command
                .createHelp()
                .visibleCommands(command)
                .map((c) => c.name())
                .filter((name) => name !== "help")
            : (firstArgument?.argChoices ?? []),
      argKind: argKindOf(command),
      subcommands: command
        .createHelp()
        .visibleCommands(command)
        .filter((c) => c.name() !== "help")
        .map((c) => ({ name: c.name(), argKind: argKindOf(c) })),
    };
  });
  return { options: globals, commands };
}

const word = (text: string) => text.replace(/[^A-Za-z0-9_]/g, "_");
/** A word list for bash's `compgen -W` inside double quotes (option names and choices are plain words). */
const bashWords = (words: string[]) => words.join(" ").replace(/["$`\\]/g, "\\$&");

/**
 * A bash completion script for the program: command names, each command's options, and the
 * values of options and arguments that take a fixed list. Registered for `jobs` and
 * `training-jobs`.
 *
 * @example
 * process.stdout.write(bashCompletion(programSpec(buildProgram())));
 */
export function bashCompletion(spec: ProgramSpec): string {
  const scopes: { key: string; options: OptionSpec[]; argChoices: string[] }[] = [
    { key: "", options: spec.options, argChoices: spec.commands.map((c) => c.name) },
    ...spec.commands.map((c) => ({ key: c.name, options: c.options, argChoices: c.argChoices })),
  ];
  const optionsCase = scopes.map((s) => `    ${JSON.stringify(s.key)}) echo "${bashWords(s.options.flatMap((o) => o.flags))}" ;;`);
  const valueCase = scopes.flatMap((s) =>
    s.options
      .filter((o) => o.takesValue)
      .map((o) => `    ${JSON.stringify(s.key)}/${o.flags.join("|" + JSON.stringify(s.key) + "/")}) echo "${bashWords(o.choices)}" ;;`),
  );
  const argsCase = scopes.filter((s) => s.key !== "").map((s) => `    ${JSON.stringify(s.key)}) echo "${bashWords(s.argChoices)}" ;;`);
  const kinds = spec.commands.flatMap((c) => [
    ...(c.argKind ? [`    ${JSON.stringify(`${c.name}/`)}) echo ${c.argKind} ;;`] : []),
    ...c.subcommands.filter((sub) => sub.argKind).map((sub) => `    ${JSON.stringify(`${c.name}/${sub.name}`)}) echo ${sub.argKind} ;;`),
  ]);
  return `# bash completion for jobs and training-jobs, generated by \`jobs completion bash\` from the program itself.
# Install: source <(training-jobs completion bash)   (in ~/.bashrc; or \`jobs\` where it is aliased)

# The options of a command ("" before any command).
_jobs_options() {
  case "$1" in
${optionsCase.join("\n")}
  esac
}

# The values of option $2 of command $1 (a fixed list, or nothing); fails for an option that takes none.
_jobs_values() {
  case "$1/$2" in
${valueCase.join("\n")}
    *) return 1 ;;
  esac
}

# The values of the first argument of command $1.
_jobs_arguments() {
  case "$1" in
${argsCase.join("\n")}
  esac
}

# What the service lists for the first argument of command $1 (subcommand after the /): jobs, environments or nothing.
_jobs_kind() {
  case "$1" in
${kinds.join("\n")}
  esac
}

# The job ids or environment names the service has (\`jobs __complete <kind>\`; nothing when it cannot be reached).
# Runs the program completed: through its alias (alias jobs=training-jobs), never the shell's own \`jobs\`.
_jobs_service() {
  local -a program
  if [[ -n \${BASH_ALIASES[$1]} ]]; then program=( \${BASH_ALIASES[$1]} ); else program=( "$1" ); fi
  [[ \${program[0]} == jobs ]] && program=( training-jobs )
  "\${program[@]}" __complete "$2" 2>/dev/null
}

_jobs_complete() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" prev="" command="" sub="" kind="" option="" i w
  (( COMP_CWORD > 0 )) && prev="\${COMP_WORDS[COMP_CWORD-1]}"
  local -i arguments=0
  # Find the command, skipping options and their values ("--format json", "--format=json").
  for (( i = 1; i < COMP_CWORD; i++ )); do
    w="\${COMP_WORDS[i]}"
    if [[ $w == -* ]]; then
      if [[ $w != *=* ]] && _jobs_values "$command" "$w" >/dev/null; then
        if [[ \${COMP_WORDS[i+1]} == "=" ]]; then (( i += 2 )); else (( i += 1 )); fi
      fi
    elif [[ -z $command ]]; then
      command="$w"
    else
      (( arguments == 0 )) && sub="$w"
      arguments+=1
    fi
  done
  COMPREPLY=()
  # The value of an option: "--format <TAB>", "--format=<TAB>" (bash splits at =).
  if [[ $prev == "=" && COMP_CWORD -ge 2 ]]; then
    option="\${COMP_WORDS[COMP_CWORD-2]}"
  elif [[ $prev == -* && $prev != *=* ]]; then
    option="$prev"
  fi
  if [[ -n $option ]] && _jobs_values "$command" "$option" >/dev/null; then
    COMPREPLY=( $(compgen -W "$(_jobs_values "$command" "$option")" -- "$cur") )
    return 0
  fi
  if [[ $cur == -* ]]; then
    COMPREPLY=( $(compgen -W "$(_jobs_options "$command")" -- "$cur") )
  elif [[ -z $command ]]; then
    COMPREPLY=( $(compgen -W "${bashWords(spec.commands.map((c) => c.name))}" -- "$cur") )
  elif (( arguments == 0 )); then
    COMPREPLY=( $(compgen -W "$(_jobs_arguments "$command")" -- "$cur") )
    kind="$(_jobs_kind "$command/")"
  elif (( arguments == 1 )); then
    kind="$(_jobs_kind "$command/$sub")"
  fi
  if [[ -n $kind ]]; then
    COMPREPLY+=( $(compgen -W "$(_jobs_service "\${COMP_WORDS[0]}" "$kind")" -- "$cur") )
  fi
  return 0
}

complete -F _jobs_complete ${COMPLETED_NAMES.join(" ")}
`;
}

/** Text for a zsh single-quoted word. */
const zshQuote = (text: string) => `'${text.replace(/'/g, "'\\''")}'`;
/** A description inside _arguments' [...] (no newlines, brackets and colons escaped). */
const zshDescription = (text: string) => text.replace(/\s+/g, " ").replace(/([[\]\\])/g, "\\$1");
/** A command's description up to its first sentence's end: a completion menu shows one line. */
const firstSentence = (text: string) =>
  text
    .replace(/\s+/g, " ")
    .split(/(?<=\.) /)[0]!
    .replace(/\.$/, "");

function zshOption(option: OptionSpec): string {
  const description = zshDescription(option.description);
  const value = option.takesValue
    ? `:${word(option.flags.at(-1)!.replace(/^-+/, ""))}:${option.choices.length ? `(${option.choices.join(" ")})` : " "}`
    : "";
  if (option.flags.length === 1) return zshQuote(`${option.flags[0]}[${description}]${value}`);
  // Either spelling, offered once: '(-f --follow)'{-f,--follow}'[...]'
  return `${zshQuote(`(${option.flags.join(" ")})`)}{${option.flags.join(",")}}${zshQuote(`[${description}]${value}`)}`;
}

/**
 * A zsh completion script (`#compdef jobs training-jobs`): put it in a directory of $fpath as
 * `_jobs`, or source it after compinit.
 *
 * @example
 * process.stdout.write(zshCompletion(programSpec(buildProgram())));
 */
export function zshCompletion(spec: ProgramSpec): string {
  const subCases = spec.commands.flatMap((c) =>
    c.subcommands.filter((sub) => sub.argKind).map((sub) => `    ${zshQuote(`${c.name}/${sub.name}`)}) _jobs_service ${sub.argKind} ;;`),
  );
  const commandList = spec.commands.map((c) => `    ${zshQuote(`${c.name}:${firstSentence(c.description)}`)}`);
  const commandCases = spec.commands.map((c) => {
    const sub = c.subcommands.filter((s) => s.argKind);
    const lines = [
      ...c.options.map(zshOption),
      ...(c.argChoices.length ? [zshQuote(`1:argument:(${c.argChoices.join(" ")})`)] : []),
      ...(c.argKind ? [zshQuote(`1:${c.argKind}:_jobs_service_${c.argKind}`)] : []),
      // `env show <name>`: the subcommand is $words[2].
      ...(sub.length ? [zshQuote(`2:argument:_jobs_sub_argument`)] : []),
      zshQuote("*:: :_default"),
    ];
    return `        ${zshQuote(c.name)})\n          _arguments -s \\\n            ${lines.join(" \\\n            ")}\n          ;;`;
  });
  return `#compdef ${COMPLETED_NAMES.join(" ")}
# zsh completion for jobs and training-jobs, generated by \`jobs completion zsh\` from the program itself.
# Install: training-jobs completion zsh > "\${fpath[1]}/_jobs"   (then restart zsh)
#     or:  source <(training-jobs completion zsh)                 (in ~/.zshrc, after compinit)

# The job ids or environment names the service has (\`jobs __complete <kind>\`; nothing when it cannot be reached),
# from the program being completed: through its alias, never the shell's own \`jobs\`.
_jobs_service() {
  local -a program words
  program=( \${(z)\${aliases[$_jobs_name]:-$_jobs_name}} )
  [[ $program[1] == jobs ]] && program=( training-jobs )
  words=( \${(f)"$($program __complete $1 2>/dev/null)"} )
  compadd -a words
}
_jobs_service_jobs() { _jobs_service jobs }
_jobs_service_environments() { _jobs_service environments }

# The first argument of a subcommand ($words[1] the command, $words[2] the subcommand).
_jobs_sub_argument() {
  case "$words[1]/$words[2]" in
${subCases.join("\n")}
    *) _default ;;
  esac
}

_jobs() {
  local _jobs_name=$words[1]
  local curcontext="$curcontext" state line
  typeset -A opt_args
  _arguments -C -s \\
    ${spec.options.map(zshOption).join(" \\\n    ")} \\
    '1: :->command' \\
    '*:: :->argument'
  case $state in
    command)
      local -a commands
      commands=(
${commandList.join("\n")}
      )
      _describe -t commands 'jobs command' commands
      ;;
    argument)
      curcontext="\${curcontext%:*:*}:jobs-$line[1]:"
      case $line[1] in
${commandCases.join("\n")}
      esac
      ;;
  esac
}

if [ "$funcstack[1]" = "_jobs" ]; then
  _jobs "$@"
else
  compdef _jobs ${COMPLETED_NAMES.join(" ")}
fi
`;
}
