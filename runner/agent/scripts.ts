import { spawn } from "node:child_process";
import { existsSync, realpathSync } from "node:fs";
import { isAbsolute, relative, resolve } from "node:path";
import { fillPlaceholders, splitCommand, type ScriptKind } from "../../shared/placeholders";
import { globMatch } from "../../shared/labels";
import type { TrainerKind } from "./job";
import { findProgram, sandboxArgv, type SandboxSpec } from "./sandbox";
import type { TrainerEvent } from "./trainer-events";

/*
 * The scripts an environment names: --post_checkpoint_script after each checkpoint,
 * --validation_external_script for each validation with --validation_method external-script.
 * Run by the runner beside the trainer (never blocking it), with the placeholders filled into
 * argv and no shell, in the job's sandbox. Only programs the box's runner config declares
 * (`scripts`) run; another is refused with a script.refused event. Their output and exit become
 * the job's events.
 */

const MAX_OUTPUT_LINES = 200;

/**
 * Whether a script's program is one the box declares: its path (a bare name is looked up on
 * `path`, a relative one taken from `cwd`), with any `..` resolved, matches one of the
 * `allowed` paths or globs.
 *
 * @example
 * scriptAllowed("/opt/hooks/upload.sh", ["/opt/hooks/*"], "/usr/bin"); // true
 */
export function scriptAllowed(program: string, allowed: string[], path: string, cwd = "/"): boolean {
  const found = program.includes("/") ? resolve(cwd, program) : findProgram(program, path);
  return found !== null && allowed.some((pattern) => globMatch(pattern, found));
}

/**
 * Whether `path` (as a trainer named it, relative to the job's directory or absolute) lies inside
 * `jobDir`, links resolved: what a trainer posts must never hand a script another path.
 *
 * @example
 * insideJobDir("/w/jobs/j1", "output/checkpoint-10"); // true; "/etc/passwd" -> false
 */
export function insideJobDir(jobDir: string, path: string): boolean {
  const within = (parent: string, child: string) => {
    const rel = relative(parent, child);
    return rel === "" || (!rel.startsWith("..") && !isAbsolute(rel));
  };
  const absolute = resolve(jobDir, path);
  if (!within(jobDir, absolute)) return false;
  try {
    return !existsSync(absolute) || within(realpathSync(jobDir), realpathSync(absolute));
  } catch {
    return false;
  }
}

/** Runs one script for an event, if the box declares its program; resolves when it has ended (or was refused). */
export function runScript(
  kind: ScriptKind,
  commandLine: string,
  values: Record<string, string>,
  options: { cwd: string; env: Record<string, string>; allowed: string[]; sandbox: SandboxSpec | null },
  emit: (event: { type: string } & Record<string, unknown>) => void,
): Promise<void> {
  const local = values.local_checkpoint_path;
  if (local && !insideJobDir(options.cwd, local)) {
    emit({
      type: "script.refused",
      level: "warning",
      title: `${kind} script not run: the checkpoint path it would be given (${local.slice(0, 300)}) is outside the job's directory`,
      data: { script: kind, path: local.slice(0, 1000) },
    });
    return Promise.resolve();
  }
  let argv: string[];
  try {
    argv = fillPlaceholders(splitCommand(commandLine), values);
    if (!argv.length) throw new Error("the command is empty");
  } catch (error) {
    emit({ type: "script.failed", title: `${kind} script not run`, data: { script: kind, error: (error as Error).message } });
    return Promise.resolve();
  }
  if (!scriptAllowed(argv[0]!, options.allowed, options.env.PATH ?? "", options.cwd)) {
    emit({
      type: "script.refused",
      title: `${kind} script ${argv[0]} not run: this box's runner config does not declare it in scripts`,
      data: { script: kind, program: argv[0] },
    });
    return Promise.resolve();
  }
  const spawned = options.sandbox ? sandboxArgv(argv, options.sandbox) : argv;
  return new Promise((resolve) => {
    const child = spawn(spawned[0]!, spawned.slice(1), {
      cwd: options.cwd,
      env: options.env,
      stdio: ["ignore", "pipe", "pipe"],
      shell: false,
    });
    let lines = 0;
    const forward = (stream: NodeJS.ReadableStream) => {
      let partial = "";
      stream.on("data", (chunk: Buffer) => {
        const parts = (partial + chunk.toString("utf8")).split("\n");
        partial = parts.pop() ?? "";
        for (const line of parts)
          if (line.trim() && lines++ < MAX_OUTPUT_LINES)
            emit({ type: "script.output", message: line.slice(0, 4000), data: { script: kind } });
      });
      stream.on(
        "end",
        () =>
          partial.trim() &&
          lines++ < MAX_OUTPUT_LINES &&
          emit({ type: "script.output", message: partial.slice(0, 4000), data: { script: kind } }),
      );
    };
    forward(child.stdout);
    forward(child.stderr);
    child.on("error", (error) => {
      emit({ type: "script.failed", title: `${kind} script could not start`, data: { script: kind, argv, error: error.message } });
      resolve();
    });
    child.on("close", (code, signal) => {
      emit({
        type: "script.finished",
        title: `${kind} script exited ${signal ? `on ${signal}` : code}`,
        data: { script: kind, argv, exit_code: code, signal },
      });
      resolve();
    });
  });
}

interface ScriptRun {
  kind: ScriptKind;
  command: string;
  event: { localCheckpointPath?: string; remoteCheckpointPath?: string; globalStep?: number };
}

/**
 * The scripts an event calls for, if the environment names them, run by the runner for
 * every trainer: --post_checkpoint_script after each checkpoint.saved; --validation_external_script
 * at each validation.started with --validation_method external-script (`{local_checkpoint_path}`:
 * the newest checkpoint); --post_upload_script after each upload.completed. For SimpleTuner the
 * post-upload script runs when SimpleTuner itself would run it: after each publication to its hub
 * (`--push_to_hub`), else after each checkpoint and once the final model is saved.
 */
export function scriptsFor(
  config: Record<string, unknown>,
  event: TrainerEvent,
  kind: TrainerKind,
  outputDir: string,
  newestCheckpoint: string,
): ScriptRun[] {
  const data = (event.data ?? {}) as { path?: unknown; step?: unknown; local_path?: unknown; remote_path?: unknown };
  const step = typeof data.step === "number" ? data.step : undefined;
  const text = (name: string) => (typeof config[name] === "string" && (config[name] as string).trim() ? (config[name] as string) : null);
  const runs: ScriptRun[] = [];
  const postCheckpoint = text("--post_checkpoint_script");
  const postUpload = text("--post_upload_script");
  const external = text("--validation_external_script");
  const checkpointPath = typeof data.path === "string" ? data.path : "";
  if (event.type === "checkpoint.saved" && postCheckpoint)
    runs.push({ kind: "post_checkpoint", command: postCheckpoint, event: { localCheckpointPath: checkpointPath, globalStep: step } });
  if (postUpload) {
    const hub = kind === "simpletuner" && (config["--push_to_hub"] === true || config["--push_to_hub"] === "true");
    const hubModel = text("--hub_model_id");
    if (event.type === "upload.completed")
      runs.push({
        kind: "post_upload",
        command: postUpload,
        event: {
          localCheckpointPath: typeof data.local_path === "string" ? data.local_path : kind === "simpletuner" ? outputDir : "",
          remoteCheckpointPath:
            typeof data.remote_path === "string" ? data.remote_path : hub && hubModel ? `https://huggingface.co/${hubModel}` : "",
          globalStep: step,
        },
      });
    else if (kind === "simpletuner" && !hub && event.type === "checkpoint.saved")
      runs.push({ kind: "post_upload", command: postUpload, event: { localCheckpointPath: checkpointPath, globalStep: step } });
    else if (kind === "simpletuner" && !hub && event.type === "model.saved")
      runs.push({ kind: "post_upload", command: postUpload, event: { localCheckpointPath: outputDir, globalStep: step } });
  }
  const method = String(config["--validation_method"] ?? "").replace(/_/g, "-");
  if (event.type === "validation.started" && method === "external-script" && external)
    runs.push({ kind: "validation", command: external, event: { localCheckpointPath: newestCheckpoint, globalStep: step } });
  return runs;
}
