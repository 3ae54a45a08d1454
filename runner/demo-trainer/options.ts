/*
 * The demo trainer's command line: SimpleTuner-style `--name value` (or `--name=value`) options,
 * the same names an environment's option map uses. A bare `--flag` is true.
 */

export type Options = Map<string, string>;

export function parseArgs(argv: string[]): Options {
  const options: Options = new Map();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (!arg.startsWith("--")) throw new Error(`unexpected argument ${JSON.stringify(arg)}: options look like --name value`);
    const eq = arg.indexOf("=");
    if (eq !== -1) options.set(arg.slice(0, eq), arg.slice(eq + 1));
    else if (i + 1 < argv.length && !argv[i + 1]!.startsWith("--")) options.set(arg, argv[++i]!);
    else options.set(arg, "true");
  }
  return options;
}

export function text(options: Options, name: string, fallback: string): string {
  return options.get(name) ?? fallback;
}

export function int(options: Options, name: string, fallback: number, min = 0): number {
  const raw = options.get(name);
  if (raw === undefined || raw === "") return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min) throw new Error(`${name} must be a whole number >= ${min}, not ${JSON.stringify(raw)}`);
  return value;
}

export function num(options: Options, name: string, fallback: number): number {
  const raw = options.get(name);
  if (raw === undefined || raw === "") return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value)) throw new Error(`${name} must be a number, not ${JSON.stringify(raw)}`);
  return value;
}

export function flag(options: Options, name: string): boolean {
  const raw = options.get(name)?.toLowerCase();
  return raw === "true" || raw === "1" || raw === "yes";
}
