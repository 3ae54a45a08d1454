// `node --import tsx runner/demo-trainer/main.ts --output_dir out --max_train_steps 20 ...`:
// the demo trainer as a process. Events are JSON lines on stdout; errors go to stderr, exit 1.
import { runDemoTrainer } from "./trainer";

// A stop is a signal, as for SimpleTuner: SIGINT (KeyboardInterrupt there) or SIGTERM. The step
// in progress finishes first; a second signal changes nothing (SIGKILL is the runner's last word).
let stop: NodeJS.Signals | null = null;
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    stop ??= signal;
  });
}

try {
  await runDemoTrainer(process.argv.slice(2), {
    emit: (event) => process.stdout.write(JSON.stringify(event) + "\n"),
    log: (line) => process.stdout.write(line + "\n"),
    env: process.env,
    sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
    stopRequested: () => stop,
  });
} catch (error) {
  process.stderr.write(`demo trainer: ${(error as Error).message}\n`);
  process.exitCode = 1;
}
