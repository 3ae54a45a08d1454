// `npm run runner -- start --url <edge> --token <stw_...> [--local] [--label k=v ...]`: the runner
// agent for a GPU box. The token may come from RUNNER_TOKEN instead (keeps it out of `ps`).
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { Runner } from "./agent";

const USAGE = `usage: runner start --url <edge URL> --token <worker token> [--local] [--label key=value ...]
                    [--work-dir <dir>] [--poll-ms <ms>] [--stop-grace-seconds <s>]
  --token        the worker token an admin created (POST /api/admin/workers); or set RUNNER_TOKEN
  --local        this box is the service's local GPU box (at most one); otherwise a remote worker
  --label k=v    labels jobs can ask for with worker_labels (repeatable)
  --work-dir     where job directories go (default ./.runner)
  --poll-ms      how often to ask for work unprompted; each ask is also the heartbeat. The edge
                 wakes the runner through its channel the moment work is waiting (default 5000)`;

function fail(message: string): never {
  process.stderr.write(`runner: ${message}\n${USAGE}\n`);
  process.exit(2);
}

const [command, ...rest] = process.argv.slice(2);
if (command !== "start") fail(command ? `unknown command ${JSON.stringify(command)}` : "a command is required");
let values;
try {
  ({ values } = parseArgs({
    args: rest,
    options: {
      url: { type: "string" },
      token: { type: "string" },
      local: { type: "boolean", default: false },
      label: { type: "string", multiple: true, default: [] },
      "work-dir": { type: "string", default: ".runner" },
      "poll-ms": { type: "string", default: "5000" },
      "stop-grace-seconds": { type: "string", default: "10" },
    },
  }));
} catch (error) {
  fail((error as Error).message);
}
const url = values.url ?? fail("--url is required");
const token = values.token ?? process.env.RUNNER_TOKEN ?? fail("--token (or RUNNER_TOKEN) is required");
const labels: Record<string, string> = {};
for (const label of values.label) {
  const eq = label.indexOf("=");
  if (eq < 1) fail(`--label must look like key=value, not ${JSON.stringify(label)}`);
  labels[label.slice(0, eq)] = label.slice(eq + 1);
}
const pollMs = Number(values["poll-ms"]);
const grace = Number(values["stop-grace-seconds"]);
if (!Number.isInteger(pollMs) || pollMs < 50) fail("--poll-ms must be a whole number of at least 50");
if (!Number.isFinite(grace) || grace < 0) fail("--stop-grace-seconds must be a number of seconds");

const runner = new Runner({
  url,
  token,
  role: values.local ? "local" : "remote",
  labels,
  workDir: resolve(values["work-dir"]),
  pollMs,
  stopGraceSeconds: grace,
  log: (line) => process.stdout.write(`[runner] ${line}\n`),
});
try {
  await runner.start();
} catch (error) {
  process.stderr.write(`runner: could not register with ${url}: ${(error as Error).message}\n`);
  process.exit(1);
}
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    process.stdout.write(`[runner] ${signal}: stopping trainers\n`);
    void runner.stop().then(() => process.exit(0));
  });
}
