// The built-in demo trainer as a real process: the events it prints, the checkpoints it writes,
// the signal file it reads and the stop signals it obeys. And the preview schedule as a pure function.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PNG } from "pngjs";
import { afterAll, describe, expect, it } from "vitest";
import { SignalFile } from "../../runner/agent/signal-file";
import { previewSteps } from "../../shared/preview";

const dirs: string[] = [];
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), "demo-trainer-"));
  dirs.push(dir);
  return dir;
};
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

interface Event {
  type: string;
  data: Record<string, any>;
  body?: string;
  images?: { src: string; mime_type: string }[];
}

/** Runs the trainer; `onEvent` may act while it runs. Resolves with its events, log lines and exit code. */
function runTrainer(
  args: string[],
  options: { env?: Record<string, string>; onEvent?: (e: Event, child: ReturnType<typeof spawn>) => void } = {},
) {
  const child = spawn(process.execPath, ["--import", "tsx", "runner/demo-trainer/main.ts", ...args], {
    env: { ...process.env, ...options.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const events: Event[] = [];
  const logs: string[] = [];
  let stderr = "";
  let buffer = "";
  child.stdout!.on("data", (chunk: Buffer) => {
    buffer += chunk.toString("utf8");
    const lines = buffer.split("\n");
    buffer = lines.pop()!;
    for (const line of lines) {
      if (!line.startsWith("{")) {
        logs.push(line);
        continue;
      }
      const event = JSON.parse(line) as Event;
      events.push(event);
      options.onEvent?.(event, child);
    }
  });
  child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
  return new Promise<{ events: Event[]; logs: string[]; stderr: string; code: number | null }>((resolve) =>
    child.on("close", (code) => resolve({ events, logs, stderr, code })),
  );
}

describe("previewSteps", () => {
  it("gives the first step, every interval, and the last", () => {
    expect(previewSteps(20, 4)).toEqual([1, 5, 9, 13, 17, 20]);
    expect(previewSteps(9, 4)).toEqual([1, 5, 9]);
    expect(previewSteps(5, 1)).toEqual([1, 2, 3, 4, 5]);
    expect(previewSteps(1, 4)).toEqual([1]);
    expect(previewSteps(3, 0)).toEqual([1, 2, 3]);
    expect(previewSteps(0, 4)).toEqual([]);
  });
});

describe("the demo trainer", () => {
  it("trains to completion: loss falls, checkpoints roll, previews follow the schedule as real PNGs", async () => {
    const out = tempDir();
    const { events, code, stderr } = await runTrainer(
      [
        "--output_dir",
        out,
        "--max_train_steps",
        "20",
        "--checkpointing_steps",
        "5",
        "--checkpoints_total_limit",
        "2",
        "--validation_preview",
        "true",
        "--validation_preview_steps",
        "4",
        "--validation_num_inference_steps",
        "20",
        "--validation_resolution",
        "48x32",
        "--validation_prompt",
        "a red fox",
        "--demo_step_ms",
        "0",
      ],
      { env: { CUDA_VISIBLE_DEVICES: "1,3", TRAINER_JOB_ID: "job-7" } },
    );
    expect(stderr).toBe("");
    expect(code).toBe(0);
    expect(events[0]).toMatchObject({
      type: "training.started",
      data: { job_id: "job-7", total_steps: 20, resumed_from_step: 0, cuda_visible_devices: "1,3" },
    });
    const progress = events.filter((e) => e.type === "training.progress");
    expect(progress.map((e) => e.data.step)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    const firstFive = progress.slice(0, 5).reduce((s, e) => s + e.data.loss, 0);
    const lastFive = progress.slice(-5).reduce((s, e) => s + e.data.loss, 0);
    expect(lastFive).toBeLessThan(firstFive / 2);
    const saved = events.filter((e) => e.type === "checkpoint.saved").map((e) => e.data.step);
    expect(saved).toEqual([5, 10, 15, 20]);
    expect(readdirSync(out).sort()).toEqual(["checkpoint-15", "checkpoint-20"]);
    const previews = events.filter((e) => e.type === "validation.image");
    expect(previews.map((e) => e.data.step_label)).toEqual(["1/20", "5/20", "9/20", "13/20", "17/20", "20/20"]);
    expect(previews[1]).toMatchObject({
      body: "a red fox",
      data: { step: 5, resolution: [48, 32], validation_type: "intermediary", prompt: "a red fox" },
    });
    expect(typeof previews[1]!.data.timestep).toBe("number");
    const image = previews[0]!.images![0]!;
    expect(image.mime_type).toBe("image/png");
    const png = PNG.sync.read(Buffer.from(image.src.replace(/^data:image\/png;base64,/, ""), "base64"));
    expect([png.width, png.height]).toEqual([48, 32]);
    // Previews denoise: the first and the last are different pictures.
    expect(previews[0]!.images![0]!.src).not.toBe(previews[5]!.images![0]!.src);
    expect(events.at(-1)).toMatchObject({ type: "training.completed", data: { step: 20, output_dir: out } });
    expect(events.at(-1)!.data.loss).toBeLessThan(progress[0]!.data.loss);
  });

  it("resumes from the latest checkpoint with --resume_from_checkpoint latest", async () => {
    const out = tempDir();
    await runTrainer(["--output_dir", out, "--max_train_steps", "6", "--checkpointing_steps", "3", "--demo_step_ms", "0"]);
    const { events, code } = await runTrainer([
      "--output_dir",
      out,
      "--max_train_steps",
      "10",
      "--resume_from_checkpoint",
      "latest",
      "--demo_step_ms",
      "0",
    ]);
    expect(code).toBe(0);
    expect(events[0]!.data.resumed_from_step).toBe(6);
    expect(events.filter((e) => e.type === "training.progress").map((e) => e.data.step)).toEqual([7, 8, 9, 10]);
    expect(existsSync(join(out, "checkpoint-10"))).toBe(true);
  });

  it("does one validation or checkpoint per increase of its signal file's counters, after the step in progress, as train.py does", async () => {
    const out = tempDir();
    const dir = tempDir();
    const file = join(dir, "signals.json");
    const signals = new SignalFile(file);
    let asked = false;
    const { events, logs, code } = await runTrainer(["--output_dir", out, "--max_train_steps", "1000", "--demo_step_ms", "20"], {
      env: { SIMPLETUNER_ACCELERATE_SIGNAL_FILE: file },
      onEvent: (e, child) => {
        if (e.type === "training.progress" && e.data.step === 3 && !asked) {
          asked = true;
          // The three requests reach the trainer as one replacement of its file: three separate
          // writes could straddle one of its reads and then be acted on at different steps.
          const staged = new SignalFile(`${file}.staged`);
          staged.bump("validation");
          staged.bump("validation");
          staged.bump("checkpoint");
          renameSync(staged.path, signals.path);
        }
        if (e.type === "checkpoint.saved") child.kill("SIGINT");
      },
    });
    expect(code).toBe(0);
    const validations = events.filter((e) => e.type === "validation.completed");
    const checkpoint = events.find((e) => e.type === "checkpoint.saved")!;
    // Two increments, two validations, at the first step boundary after the request: step 3
    // itself when the trainer had not yet looked at the file, a later one otherwise.
    expect(validations.map((e) => e.data.on_demand)).toEqual([true, true]);
    expect(validations[0]!.data.step).toBeGreaterThanOrEqual(3);
    expect(validations[1]!.data.step).toBe(validations[0]!.data.step);
    expect(checkpoint.data).toMatchObject({ on_demand: true, step: validations[0]!.data.step });
    expect(events.filter((e) => e.type === "checkpoint.saved")).toHaveLength(1);
    const stopped = events.at(-1)!;
    expect(stopped).toMatchObject({ type: "training.status", data: { status: "interrupted", signal: "SIGINT" } });
    expect(stopped.data.step).toBeGreaterThanOrEqual(checkpoint.data.step);
    expect(stopped.data.step).toBeLessThan(1000);
    expect(readdirSync(out)).toEqual([`checkpoint-${checkpoint.data.step}`]);
    expect(logs.filter((l) => l.startsWith("WARNING"))).toEqual([]);
  });

  it("warns once, and trains on, when its signal file is missing or unreadable; acts once it is readable", async () => {
    const out = tempDir();
    const file = join(tempDir(), "signals.json");
    let stage = 0;
    const { events, logs, code } = await runTrainer(["--output_dir", out, "--max_train_steps", "1000", "--demo_step_ms", "20"], {
      env: { SIMPLETUNER_ACCELERATE_SIGNAL_FILE: file },
      onEvent: (e, child) => {
        if (e.type !== "training.progress" && e.type !== "validation.completed") return;
        if (stage === 0 && e.type === "training.progress" && e.data.step === 3) ((stage = 1), writeFileSync(file, "{half"));
        else if (stage === 1 && e.type === "training.progress" && e.data.step === 6)
          ((stage = 2), writeFileSync(file, JSON.stringify({ manual_validation: 1 })));
        else if (stage === 2 && e.type === "validation.completed") ((stage = 3), child.kill("SIGINT"));
      },
    });
    expect(code).toBe(0);
    expect(logs.filter((l) => l.includes("is not there"))).toHaveLength(1);
    expect(logs.filter((l) => l.includes("is unreadable"))).toHaveLength(1);
    expect(logs.every((l) => !l.startsWith("WARNING") || l.startsWith(`WARNING: signal file ${file}`))).toBe(true);
    expect(events.filter((e) => e.type === "validation.completed")).toHaveLength(1);
    expect(events.at(-1)!.type).toBe("training.status");
  });

  it("stops cleanly on SIGTERM too: the step finishes, an interrupted status, exit 0", async () => {
    const out = tempDir();
    const { events, code } = await runTrainer(["--output_dir", out, "--max_train_steps", "1000", "--demo_step_ms", "20"], {
      onEvent: (e, child) => {
        if (e.type === "training.progress" && e.data.step === 2) child.kill("SIGTERM");
      },
    });
    expect(code).toBe(0);
    expect(events.at(-1)).toMatchObject({ type: "training.status", data: { status: "interrupted", signal: "SIGTERM" } });
    expect(events.filter((e) => e.type === "training.completed")).toEqual([]);
  });

  it("refuses bad options with a message and exit code 1", async () => {
    const none = await runTrainer(["--output_dir", tempDir(), "--max_train_steps", "0"]);
    expect(none.code).toBe(1);
    expect(none.stderr).toContain("set --max_train_steps or --num_train_epochs");
    const bad = await runTrainer(["--output_dir", tempDir(), "--max_train_steps", "ten"]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('--max_train_steps must be a whole number >= 0, not "ten"');
    const res = await runTrainer(["--output_dir", tempDir(), "--max_train_steps", "1", "--validation_resolution", "big"]);
    expect(res.stderr).toContain("--validation_resolution must look like 1024x1024");
  });
});
