import { readFileSync } from "node:fs";
import { isAbsolute, resolve } from "node:path";
import { execFileSync } from "node:child_process";
import { homedir } from "node:os";
import { z } from "zod";
import { isLoopbackHost } from "../../shared/ip";
import { hostSecrets } from "./sandbox";

/*
 * The runner's settings, in one place: the box's config file (RUNNER_CONFIG or --config), the
 * command-line flags, the environment, and the defaults. The file is what the box's operator
 * declares: which trainers and scripts this box runs, and how they are sandboxed. A job's
 * environment can only pick among them. Used by `runner start` (runner/agent/main.ts) and by
 * `npm start`'s local runner (edge/local/local-runner.ts) alike.
 */

/** A problem with the runner's settings, as one line naming the field or flag. */
export class RunnerConfigError extends Error {}

const ProgramPath = z.string().min(1).max(4096);

/** The config file's shape (JSON). Unknown keys are refused so a typo is not silently ignored. */
export const RunnerConfigFile = z.strictObject({
  /** Trainer name -> argv template; placeholders {num_processes}, {job_dir}, {output_dir}. */
  trainers: z
    .record(z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.-]*$/, "a trainer name is letters, digits, _ . -"), z.array(z.string().min(1)).min(1))
    .default({}),
  /** Script programs the box allows: absolute paths, `*` matching any run of characters. */
  scripts: z.array(ProgramPath.refine(isAbsolute, "must be an absolute path (or glob)")).default([]),
  /** Whether an admin's raw `--trainer_command` runs here. */
  allow_raw_commands: z.boolean().default(false),
  /** auto: bubblewrap when found, else only built-in trainers and declared scripts; required: refuse to start without it; off: no sandbox (warned on every job). */
  sandbox: z.enum(["auto", "required", "off"]).default("auto"),
  /** The bubblewrap program (a name on PATH or a path). */
  bwrap: ProgramPath.default("bwrap"),
  /** Run trainers and scripts as this user: a user name, or { uid, gid }. */
  run_as: z.union([z.string().min(1), z.strictObject({ uid: z.number().int().min(1), gid: z.number().int().min(1) })]).optional(),
  /** Where job directories and the dataset cache go (default ./.runner). */
  work_dir: ProgramPath.optional(),
  /** More paths sandboxed programs must not see: folders (an empty tmpfs over each) and files (cannot be opened). */
  hide: z.array(ProgramPath.refine(isAbsolute, "must be an absolute path")).default([]),
  /** isolated: each sandbox has a network of its own (loopback, the job's callback, allow_hosts through a proxy); host: the box's network, shared. */
  network: z.enum(["isolated", "host"]).default("isolated"),
  /** Hosts sandboxed programs may reach through the job's proxy when the network is isolated: names, or `*.example.com`. */
  allow_hosts: z
    .array(
      z
        .string()
        .max(253)
        .regex(
          /^(\*\.)?[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$/,
          "a host name, or *.example.com",
        ),
    )
    .default([]),
  /** SimpleTuner's installation: its virtual environment's folder (with bin/python and bin/accelerate), or that Python. */
  simpletuner: ProgramPath.refine(isAbsolute, "must be an absolute path (the virtual environment, or its Python)").optional(),
  /** Names of the runner's environment variables handed on to trainers and scripts (e.g. HF_HOME). */
  pass_env: z
    .array(
      z
        .string()
        .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "an environment variable name")
        .refine((name) => name !== "RUNNER_TOKEN", "must not hand the runner's token to trainers"),
    )
    .default([]),
});
export type RunnerConfigFile = z.infer<typeof RunnerConfigFile>;

/** The runner's command-line flags as parseArgs gives them (runner/agent/main.ts); npm start's local runner passes the same. */
export interface RunnerFlags {
  url?: string;
  token?: string;
  local?: boolean;
  label?: string[];
  config?: string;
  "work-dir"?: string;
  "poll-ms"?: string;
  "stop-grace-seconds"?: string;
}

/** The runner's whole configuration, resolved: what runner/agent/agent.ts runs with. */
export interface RunnerConfig {
  url: string;
  token: string;
  role: "local" | "remote";
  labels: Record<string, string>;
  /** Absolute. */
  workDir: string;
  pollMs: number;
  stopGraceSeconds: number;
  /** The config file read, if any. */
  configFile: string | null;
  /** Operator-declared trainers (the built-ins are not listed here). */
  trainers: Record<string, string[]>;
  scripts: string[];
  allowRawCommands: boolean;
  sandbox: "auto" | "required" | "off";
  bwrap: string;
  runAs: { uid: number; gid: number } | null;
  /** Absolute paths masked in the sandbox besides the work directory: the config's, and the host's secrets (sandbox.ts hostSecrets). */
  hide: string[];
  network: "isolated" | "host";
  allowHosts: string[];
  /** Variables handed on to trainers and scripts as they are (pass_env), with their values. */
  passEnv: Record<string, string>;
  /** SimpleTuner's installation as the config file names it (runner/agent/simpletuner.ts checks it at start); null: none. */
  simpletuner: string | null;
  /** PATH for trainers and scripts: the runner's own. */
  path: string;
}

/** The built-in trainers; a config file may not redefine them. */
export const BUILT_IN_TRAINERS = ["simpletuner", "demo"] as const;

/**
 * Reads and checks a runner config file; throws RunnerConfigError naming the file and field.
 *
 * @example
 * readRunnerConfigFile("/etc/runner.json"); // { trainers: {...}, scripts: [...], ... }
 */
export function readRunnerConfigFile(file: string): RunnerConfigFile {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (error) {
    throw new RunnerConfigError(
      `runner config ${file}: cannot be read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`,
    );
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (error) {
    throw new RunnerConfigError(`runner config ${file}: not valid JSON (${(error as Error).message})`);
  }
  const parsed = RunnerConfigFile.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const keys = issue.code === "unrecognized_keys" ? issue.keys : [];
    const field = [...issue.path, ...keys.slice(0, 1)].join(".") || "(top level)";
    const message = issue.code === "unrecognized_keys" ? "is not a known setting" : issue.message;
    throw new RunnerConfigError(`runner config ${file}: ${field} ${message}`);
  }
  const clash = Object.keys(parsed.data.trainers).find((name) => (BUILT_IN_TRAINERS as readonly string[]).includes(name));
  if (clash) throw new RunnerConfigError(`runner config ${file}: trainers.${clash} is built in and cannot be redefined`);
  return parsed.data;
}

/**
 * The edge URL a runner may use: https, or http only on loopback (the worker token would
 * otherwise cross the network in clear).
 */
export function checkEdgeUrl(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new RunnerConfigError(`--url must be the edge's URL, not ${JSON.stringify(url)}`);
  }
  if (parsed.protocol === "https:" || (parsed.protocol === "http:" && isLoopbackHost(parsed.hostname))) return url;
  if (parsed.protocol === "http:")
    throw new RunnerConfigError(`--url ${url} is plain http on a non-loopback host: the worker token would travel in clear; use https`);
  throw new RunnerConfigError(`--url must be an http(s) URL, not ${JSON.stringify(url)}`);
}

/** A user's uid and gid on this box, by name (`id`). */
export function userIds(user: string): { uid: number; gid: number } {
  try {
    const uid = Number(execFileSync("id", ["-u", user], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim());
    const gid = Number(execFileSync("id", ["-g", user], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim());
    if (Number.isInteger(uid) && Number.isInteger(gid)) return { uid, gid };
  } catch {}
  throw new RunnerConfigError(`run_as: no user named ${JSON.stringify(user)} on this box`);
}

/**
 * The runner's whole configuration: flags over the environment (RUNNER_TOKEN, RUNNER_CONFIG, PATH)
 * over the config file over the defaults. Throws
 * RunnerConfigError with one line naming what to fix.
 *
 * @example
 * loadRunnerConfig({ url: "https://edge.example", local: true }, process.env);
 */
export function loadRunnerConfig(flags: RunnerFlags, env: Record<string, string | undefined>, cwd = process.cwd()): RunnerConfig {
  const configFile = flags.config ?? env.RUNNER_CONFIG ?? null;
  const file = configFile ? readRunnerConfigFile(resolve(cwd, configFile)) : RunnerConfigFile.parse({});
  if (!flags.url) throw new RunnerConfigError("--url is required");
  const url = checkEdgeUrl(flags.url);
  const token = flags.token ?? env.RUNNER_TOKEN;
  if (!token) throw new RunnerConfigError("--token (or RUNNER_TOKEN) is required");
  const labels: Record<string, string> = {};
  for (const label of flags.label ?? []) {
    const eq = label.indexOf("=");
    if (eq < 1) throw new RunnerConfigError(`--label must look like key=value, not ${JSON.stringify(label)}`);
    labels[label.slice(0, eq)] = label.slice(eq + 1);
  }
  const pollMs = Number(flags["poll-ms"] ?? 5000);
  const grace = Number(flags["stop-grace-seconds"] ?? 10);
  if (!Number.isInteger(pollMs) || pollMs < 50) throw new RunnerConfigError("--poll-ms must be a whole number of at least 50");
  if (!Number.isFinite(grace) || grace < 0) throw new RunnerConfigError("--stop-grace-seconds must be a number of seconds");
  return {
    url,
    token,
    role: flags.local ? "local" : "remote",
    labels,
    workDir: resolve(cwd, flags["work-dir"] ?? file.work_dir ?? ".runner"),
    pollMs,
    stopGraceSeconds: grace,
    configFile: configFile ? resolve(cwd, configFile) : null,
    trainers: file.trainers,
    scripts: file.scripts,
    allowRawCommands: file.allow_raw_commands,
    sandbox: file.sandbox,
    bwrap: file.bwrap,
    runAs: file.run_as === undefined ? null : typeof file.run_as === "string" ? userIds(file.run_as) : file.run_as,
    hide: [...file.hide, ...hostSecrets(env, configFile ? resolve(cwd, configFile) : null, homedir())],
    network: file.network,
    allowHosts: file.allow_hosts,
    passEnv: Object.fromEntries(file.pass_env.filter((name) => env[name] !== undefined).map((name) => [name, env[name]!])),
    simpletuner: file.simpletuner ?? null,
    path: env.PATH ?? "/usr/local/bin:/usr/bin:/bin",
  };
}
