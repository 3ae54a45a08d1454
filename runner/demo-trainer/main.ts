// `node --import tsx runner/demo-trainer/main.ts --output_dir out --max_train_steps 20 ...`:
// the demo trainer as a process. Events are JSON lines on stdout; errors go to stderr, exit 1.
import { runDemoTrainer } from "./trainer";

let stop = false;
process.on("SIGTERM", () => {
  stop = true;
});

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
