import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";

/*
 * SimpleTuner on a box (README "SimpleTuner on a GPU box"): the installation its runner config
 * names (`simpletuner`: the virtual environment, or its Python), checked at start, and its
 * `train.py` launched the way SimpleTuner's own server launches it
 * (simpletuner/helpers/training/trainer.py, run_trainer_job):
 *
 *   accelerate launch --mixed_precision=<p> --num_processes=<n> --num_machines=1 --dynamo_backend=no
 *     <site-packages>/simpletuner/train.py --option=value ...
 *
 * with CONFIG_BACKEND=cmd (otherwise a config/config.json in its working directory wins over every
 * option), SIMPLETUNER_JOB_ID, and its signal file. SimpleTuner would run
 * --post_checkpoint_script, --post_upload_script and --validation_external_script itself, outside
 * the box's rules: they are taken out of what it receives, and the runner runs them (scripts.ts).
 */

/** The SimpleTuner installation found on this box. */
export interface SimpleTunerInstall {
  python: string;
  accelerate: string;
  trainScript: string;
  version: string | null;
}

/** Whether this box can run SimpleTuner: the installation, or why not. */
export type SimpleTunerStatus = { available: true; install: SimpleTunerInstall } | { available: false; detail: string };

/**
 * Writes where the installed package's train.py is to the file named by its first argument, after
 * importing it (its dependencies load; it runs nothing outside __main__). A file, not stdout:
 * SimpleTuner wraps stdout to colour everything written there.
 */
const PROBE = `
import importlib.util, json, os, sys
def answer(result):
    with open(sys.argv[1], "w") as out:
        json.dump(result, out)
spec = importlib.util.find_spec("simpletuner")
if spec is None or not spec.origin:
    answer({"error": "the simpletuner package is not installed for " + sys.executable})
    sys.exit(0)
train = os.path.join(os.path.dirname(spec.origin), "train.py")
if not os.path.isfile(train):
    answer({"error": train + " does not exist"})
    sys.exit(0)
import simpletuner
import simpletuner.train
answer({"train_py": train, "version": getattr(simpletuner, "__version__", None)})
`;

/** The Python and accelerate of a `simpletuner` setting: a virtual environment's folder, or its Python. */
export function simpleTunerPrograms(setting: string): { python: string; accelerate: string } {
  const isDir = existsSync(setting) && statSync(setting).isDirectory();
  const bin = isDir ? join(setting, "bin") : dirname(setting);
  return { python: isDir ? join(bin, "python") : setting, accelerate: join(bin, "accelerate") };
}

/**
 * Checks the installation a runner config names: its Python runs, `simpletuner` imports with its
 * `train.py` (so a missing dependency shows at start, not when a job launches), and `accelerate`
 * is beside it. Never throws: a box without SimpleTuner still runs other trainers.
 *
 * @example
 * await probeSimpleTuner("/opt/simpletuner/.venv"); // { available: true, install: { trainScript: ".../simpletuner/train.py", ... } }
 */
export async function probeSimpleTuner(setting: string | null, timeoutMs = 180_000): Promise<SimpleTunerStatus> {
  if (!setting) return { available: false, detail: 'not installed on this box: its runner config names no "simpletuner" installation' };
  const { python, accelerate } = simpleTunerPrograms(setting);
  if (!existsSync(python)) return { available: false, detail: `${python} does not exist (runner config "simpletuner": ${setting})` };
  if (!existsSync(accelerate)) return { available: false, detail: `${accelerate} does not exist: install accelerate beside SimpleTuner` };
  // In a folder of its own: importing SimpleTuner writes debug.log into its working directory, and
  // a `-c` program imports from there first. The answer comes back in a file there.
  const cwd = mkdtempSync(join(tmpdir(), "simpletuner-probe-"));
  const answer = await new Promise<{ stdout: string; stderr: string; error: Error | null }>((resolve) =>
    execFile(
      python,
      ["-c", PROBE, join(cwd, "answer.json")],
      { cwd, timeout: timeoutMs, maxBuffer: 4 * 1024 * 1024, env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/" } },
      (error, stdout, stderr) => resolve({ stdout, stderr, error }),
    ),
  );
  let parsed: { train_py?: unknown; version?: unknown; error?: unknown } = {};
  try {
    parsed = JSON.parse(readFileSync(join(cwd, "answer.json"), "utf8")) as typeof parsed;
  } catch {
    // no answer: the import failed (stderr says why)
  } finally {
    rmSync(cwd, { recursive: true, force: true });
  }
  if (typeof parsed.error === "string") return { available: false, detail: parsed.error };
  if (typeof parsed.train_py !== "string") {
    const why = answer.stderr.trim().split("\n").pop() || answer.error?.message || "it printed no answer";
    return { available: false, detail: `${python} could not import simpletuner.train: ${why}` };
  }
  return {
    available: true,
    install: { python, accelerate, trainScript: parsed.train_py, version: typeof parsed.version === "string" ? parsed.version : null },
  };
}

/** Options SimpleTuner's server keeps from train.py (its accelerate settings), with the runner's own. */
const NOT_FOR_TRAIN_PY = new Set([
  "--trainer",
  "--trainer_command",
  "--num_processes",
  "--accelerate_visible_devices",
  "--accelerate_config",
  "--accelerate_extra_args",
  "--accelerate_strategy",
  "--main_process_ip",
  "--main_process_port",
  "--machine_rank",
  "--same_network",
]);

/** The scripts the runner runs itself (scripts.ts), never SimpleTuner. */
export const RUNNER_SCRIPTS = ["--post_checkpoint_script", "--post_upload_script", "--validation_external_script"] as const;

/**
 * train.py's arguments: `--option=value` for each option as SimpleTuner's server writes them
 * (cli_utils.mapping_to_cli_args: true as the bare flag, false as `=false`, lists and objects as
 * JSON), without the runner's and accelerate's options and the scripts. With
 * `--validation_method external-script`, train.py refuses to start without a script: it gets
 * `true`, which does nothing, and the runner runs the real one when the validation starts.
 *
 * @example
 * trainArgs({ "--learning_rate": 1e-4, "--use_ema": false, "--post_checkpoint_script": "x" }); // ["--learning_rate=0.0001", "--use_ema=false"]
 */
export function trainArgs(config: Record<string, unknown>): string[] {
  const args: string[] = [];
  for (const [name, value] of Object.entries(config)) {
    if (!name.startsWith("--") || NOT_FOR_TRAIN_PY.has(name) || (RUNNER_SCRIPTS as readonly string[]).includes(name)) continue;
    if (value === null || value === undefined || value === "") continue;
    if (value === true) args.push(name);
    else if (value === false) args.push(`${name}=false`);
    else args.push(`${name}=${typeof value === "object" ? JSON.stringify(value) : String(value)}`);
  }
  if (String(config["--validation_method"] ?? "").replace(/_/g, "-") === "external-script") args.push("--validation_external_script=true");
  return args;
}

/**
 * The whole command line: accelerate from the installation, one process per GPU (`--multi_gpu`
 * past one, as SimpleTuner's server adds it), one process on the CPU for a 0-GPU job, mixed
 * precision from the options (SimpleTuner's server defaults to bf16; a CPU job to none).
 *
 * @example
 * simpleTunerArgv(install, { "--max_train_steps": 8 }, 1);
 * // [".../bin/accelerate", "launch", "--mixed_precision=bf16", "--num_processes=1", "--num_machines=1", "--dynamo_backend=no", ".../train.py", "--max_train_steps=8"]
 */
export function simpleTunerArgv(install: SimpleTunerInstall, config: Record<string, unknown>, numProcesses: number): string[] {
  const precision = typeof config["--mixed_precision"] === "string" && config["--mixed_precision"] ? config["--mixed_precision"] : null;
  const launch = [
    install.accelerate,
    "launch",
    `--mixed_precision=${precision ?? (numProcesses > 0 ? "bf16" : "no")}`,
    `--num_processes=${Math.max(1, numProcesses)}`,
    "--num_machines=1",
    "--dynamo_backend=no",
  ];
  if (numProcesses > 1) launch.push("--multi_gpu");
  if (numProcesses === 0) launch.push("--cpu");
  return [...launch, install.trainScript, ...trainArgs(config)];
}

/** The environment train.py needs beyond every trainer's: its options from the command line only, and the job it belongs to. */
export function simpleTunerEnv(jobId: string): Record<string, string> {
  return { CONFIG_BACKEND: "cmd", SIMPLETUNER_CONFIG_BACKEND: "cmd", SIMPLETUNER_JOB_ID: jobId };
}
