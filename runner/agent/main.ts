// `npm run runner -- start --url <edge> --token <stw_...> [--local] [--label k=v ...] [--config <file>]`:
// the runner agent for a GPU box. The token may come from RUNNER_TOKEN instead (keeps it out of
// `ps`); the config file from RUNNER_CONFIG (README "The runner config file").
import { parseArgs } from "node:util";
import { Runner } from "./agent";
import { loadRunnerConfig, RunnerConfigError, type RunnerConfig } from "./config";

const USAGE = `usage: runner start --url <edge URL> --token <worker token> [--local] [--label key=value ...]
                    [--config <file>] [--work-dir <dir>] [--poll-ms <ms>] [--stop-grace-seconds <s>]
  --url          the edge: https, or http on loopback only
  --token        the worker token an admin created (POST /api/admin/workers); or set RUNNER_TOKEN
  --local        this box is the service's local GPU box (at most one); otherwise a remote worker
  --label k=v    labels jobs can ask for with worker_labels (repeatable)
  --config       the box's runner config file (JSON: trainers, scripts, sandbox...); or set RUNNER_CONFIG
  --work-dir     where job directories go (default: the config's work_dir, else ./.runner)
  --poll-ms      how often to ask for work unprompted; each ask is also the heartbeat. The edge
                 wakes the runner through its channel the moment work is waiting (default 5000)`;

function fail(message: string): never {
  process.stderr.write(`runner: ${message}\n${USAGE}\n`);
  process.exit(2);
}

const [command, ...rest] = process.argv.slice(2);
if (command !== "start") fail(command ? `unknown command ${JSON.stringify(command)}` : "a command is required");
let config: RunnerConfig;
let runner: Runner;
const log = (line: string) => process.stdout.write(`[runner] ${line}\n`);
try {
  const { values } = parseArgs({
    args: rest,
    options: {
      url: { type: "string" },
      token: { type: "string" },
      local: { type: "boolean", default: false },
      label: { type: "string", multiple: true, default: [] },
      config: { type: "string" },
      "work-dir": { type: "string" },
      "poll-ms": { type: "string" },
      "stop-grace-seconds": { type: "string" },
    },
  });
  config = loadRunnerConfig(values, process.env);
  runner = new Runner({ ...config, log });
} catch (error) {
  // A config file's problem is one line naming the field; a flag's gets the usage too.
  if (error instanceof RunnerConfigError && error.message.startsWith("runner config ")) {
    process.stderr.write(`runner: ${error.message}\n`);
    process.exit(2);
  }
  fail((error as Error).message);
}
try {
  await runner.start();
} catch (error) {
  process.stderr.write(`runner: could not register with ${config.url}: ${(error as Error).message}\n`);
  process.exit(1);
}
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    process.stdout.write(`[runner] ${signal}: stopping trainers\n`);
    void runner.stop().then(() => process.exit(0));
  });
}
