// The runner's pure pieces around a trainer's life: how SimpleTuner is launched (as its own
// server launches it), what a trainer's terminal output becomes, the per-attempt view of a
// dataset, which scripts an event calls for, and the end report fitted to the edge's schema.
// The same pieces against a real runner and edge: test/runner/simpletuner.test.ts.
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { trainerAvailability } from "../../runner/agent/box-policy";
import { datasetView } from "../../runner/agent/datasets";
import { fitEvent } from "../../runner/agent/event-size";
import { PLAIN_BOX, planLaunch, type BoxPolicy } from "../../runner/agent/job";
import { OutputLines, MAX_LINE } from "../../runner/agent/output-lines";
import { endReport, fitReport, refusalReport, reportLines, shortenedReport } from "../../runner/agent/report";
import { scriptsFor } from "../../runner/agent/scripts";
import { simpleTunerArgv, trainArgs, type SimpleTunerInstall } from "../../runner/agent/simpletuner";
import { TrainerEvents } from "../../runner/agent/trainer-events";
import { JobFinish } from "../../shared/schemas/workers";
import { MAX_EVENT_BYTES } from "../../shared/schemas/events";
import { PNG } from "pngjs";
import { jobTrainer } from "../../shared/trainers";

const dirs: string[] = [];
const temp = () => {
  const dir = mkdtempSync(join(tmpdir(), "runner-launch-"));
  dirs.push(dir);
  return dir;
};
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

// An installation's two programs as files (the runner checks that the program it launches exists).
const ST = temp();
mkdirSync(join(ST, "bin"));
for (const name of ["python", "accelerate"]) writeFileSync(join(ST, "bin", name), "");
const install: SimpleTunerInstall = {
  python: join(ST, "bin/python"),
  accelerate: join(ST, "bin/accelerate"),
  trainScript: "/opt/st/lib/python3.11/site-packages/simpletuner/train.py",
  version: "4.8.0",
};
const box: BoxPolicy = { ...PLAIN_BOX, simpletuner: { available: true, install } };
const job = { job_id: "local-1", config_name: "x", dataloader: [], allocated_gpus: [0, 1], num_processes: 2, attempt: 2 };

describe("launching SimpleTuner", () => {
  it("runs accelerate launch on the installed train.py as SimpleTuner's server does, with CONFIG_BACKEND=cmd and the job's id", () => {
    const launch = planLaunch(
      "/w",
      {
        ...job,
        config: {
          "--model_family": "sd1x",
          "--learning_rate": 0.0001,
          "--validation_prompt": "a cat --with dashes; rm -rf /",
          "--use_ema": false,
          "--validation_preview": true,
          "--mixed_precision": "fp16",
          "--accelerate_extra_args": "--foo",
        },
      },
      [],
      "http://127.0.0.1:4000/",
      { ...box, bwrap: null },
    );
    expect(launch.kind).toBe("simpletuner");
    expect(launch.program).toEqual([
      install.accelerate,
      "launch",
      "--mixed_precision=fp16",
      "--num_processes=2",
      "--num_machines=1",
      "--dynamo_backend=no",
      "--multi_gpu",
      "/opt/st/lib/python3.11/site-packages/simpletuner/train.py",
      "--model_family=sd1x",
      "--learning_rate=0.0001",
      "--validation_prompt=a cat --with dashes; rm -rf /",
      "--use_ema=false",
      "--validation_preview",
      "--mixed_precision=fp16",
      `--webhook_config=${JSON.stringify([{ webhook_type: "raw", callback_url: "http://127.0.0.1:4000/", log_level: "info", ssl_no_verify: false }])}`,
      "--output_dir=/w/jobs/local-1/output",
    ]);
    expect(launch.env).toMatchObject({
      CONFIG_BACKEND: "cmd",
      SIMPLETUNER_CONFIG_BACKEND: "cmd",
      SIMPLETUNER_JOB_ID: "local-1",
      SIMPLETUNER_ACCELERATE_SIGNAL_FILE: "/w/jobs/local-1/trainer-signal-attempt-2.json",
      CUDA_VISIBLE_DEVICES: "0,1",
    });
    // A box's pass_env cannot turn the command-line backend off.
    const passing = planLaunch("/w", { ...job, config: {} }, [], null, { ...box, passEnv: { CONFIG_BACKEND: "json" } });
    expect(passing.env.CONFIG_BACKEND).toBe("cmd");
  });

  it("one GPU has no --multi_gpu; a CPU job runs one process with --cpu and no mixed precision unless asked", () => {
    expect(simpleTunerArgv(install, {}, 1).slice(0, 7)).toEqual([
      install.accelerate,
      "launch",
      "--mixed_precision=bf16",
      "--num_processes=1",
      "--num_machines=1",
      "--dynamo_backend=no",
      install.trainScript,
    ]);
    expect(simpleTunerArgv(install, {}, 0).slice(2, 7)).toEqual([
      "--mixed_precision=no",
      "--num_processes=1",
      "--num_machines=1",
      "--dynamo_backend=no",
      "--cpu",
    ]);
  });

  it("keeps the scripts from train.py (the runner runs them) and gives external validation a script that does nothing", () => {
    const args = trainArgs({
      "--post_checkpoint_script": "/opt/hooks/after {local_checkpoint_path}",
      "--post_upload_script": "/opt/hooks/upload",
      "--validation_external_script": "/opt/hooks/validate {global_step}",
      "--validation_method": "external-script",
      "--trainer": "simpletuner",
      "--num_processes": 2,
      "--accelerate_visible_devices": "0,1",
      "--dataloader": { a: 1 },
      "--empty": "",
      "--nothing": null,
    });
    expect(args).toEqual(["--validation_method=external-script", '--dataloader={"a":1}', "--validation_external_script=true"]);
    expect(trainArgs({ "--validation_external_script": "/opt/hooks/validate" })).toEqual([]);
    // Every other trainer is kept from them too.
    const demo = planLaunch("/w", { ...job, config: { "--trainer": "demo", "--post_checkpoint_script": "/x" } });
    expect(demo.program).not.toContain("--post_checkpoint_script");
  });

  it("a job needs the trainer its environment names, SimpleTuner when none, none for a raw command; a box says what it runs", () => {
    expect(jobTrainer({})).toBe("simpletuner");
    expect(jobTrainer({ "--trainer": "demo" })).toBe("demo");
    expect(jobTrainer({ "--trainer": "", "--trainer_command": '["x"]' })).toBeNull();
    expect(trainerAvailability({ ...PLAIN_BOX, trainers: { flux: ["flux-train"] } })).toEqual([
      { name: "simpletuner", available: false, detail: 'not installed on this box: its runner config names no "simpletuner" installation' },
      { name: "demo", available: true },
      { name: "flux", available: false, detail: "bubblewrap is not installed on this box (its sandbox)" },
    ]);
    expect(trainerAvailability({ ...box, sandbox: "off", trainers: { flux: ["flux-train"] } })).toEqual([
      { name: "simpletuner", available: true, version: "4.8.0" },
      { name: "demo", available: true },
      { name: "flux", available: true },
    ]);
  });
});

describe("a trainer's terminal output", () => {
  const lines = (...chunks: string[]) => {
    const out: string[] = [];
    const splitter = new OutputLines((line) => out.push(line));
    for (const chunk of chunks) splitter.push(chunk);
    splitter.end();
    return out;
  };

  it("is the lines a terminal shows: a progress bar redrawn with carriage returns is one line, its last state", () => {
    expect(lines("Steps:  10%|█ | 1/10\rSteps:  20%|██ | 2/10\r", "Steps:  30%|███ | 3/10\r\n", "loss 0.4\r\n")).toEqual([
      "Steps:  30%|███ | 3/10",
      "loss 0.4",
    ]);
    // A bar that never ends its line keeps only its latest state, however often it redraws.
    const splitter = new OutputLines(() => {});
    for (let i = 0; i < 100_000; i++) splitter.push(`\rStep ${i}/100000 ${"x".repeat(50)}`);
    expect((splitter as unknown as { partial: string }).partial.length).toBeLessThan(200);
    expect(lines("tail without newline")).toEqual(["tail without newline"]);
  });

  it("cuts a line that never ends at 1 MiB, keeping an event line with its images whole", () => {
    const out = lines("y".repeat(MAX_LINE * 2 + 10), "\n");
    expect(out.map((l) => l.length)).toEqual([MAX_LINE, MAX_LINE, 10]);
  });
});

describe("a dataset's view for one attempt", () => {
  it("links every listed file of the cache, not files since deleted; what the trainer writes stays in the view", () => {
    const cache = join(temp(), "cats");
    mkdirSync(join(cache, "sub"), { recursive: true });
    for (const name of ["a.png", "a.txt", "sub/b.png", "deleted.png"]) writeFileSync(join(cache, name), name);
    const view = datasetView(join(temp(), "0-cats"), { localDir: cache, names: ["a.png", "a.txt", "sub/b.png"] });
    expect(readlinkSync(join(view, "a.png"))).toBe(join(cache, "a.png"));
    expect(readFileSync(join(view, "sub", "b.png"), "utf8")).toBe("sub/b.png");
    expect(existsSync(join(view, "deleted.png"))).toBe(false);
    writeFileSync(join(view, "aspect_ratio_bucket_indices_cats.json"), "{}");
    expect(existsSync(join(cache, "aspect_ratio_bucket_indices_cats.json"))).toBe(false);
    // A new attempt starts from a fresh view: nothing the last one wrote, nothing it left as a link to elsewhere.
    const elsewhere = join(temp(), "elsewhere");
    mkdirSync(elsewhere);
    rmSync(join(view, "sub"), { recursive: true });
    symlinkSync(elsewhere, join(view, "sub"));
    datasetView(view, { localDir: cache, names: ["a.png", "sub/b.png"] });
    expect(existsSync(join(view, "aspect_ratio_bucket_indices_cats.json"))).toBe(false);
    expect(lstatSync(join(view, "sub")).isDirectory()).toBe(true);
    expect(existsSync(join(elsewhere, "b.png"))).toBe(false);
    expect(() => datasetView(join(temp(), "v"), { localDir: cache, names: ["../../etc/passwd"] })).toThrow("leaves its folder");
  });
});

describe("scripts a trainer's events call for", () => {
  const config = {
    "--post_checkpoint_script": "/opt/hooks/after {local_checkpoint_path}",
    "--post_upload_script": "/opt/hooks/upload {remote_checkpoint_path}",
    "--validation_external_script": "/opt/hooks/validate",
    "--validation_method": "external-script",
  };
  const saved = { type: "checkpoint.saved", data: { step: 4, path: "/o/checkpoint-4" } };

  it("SimpleTuner without a hub: post-checkpoint and post-upload after each checkpoint, post-upload once the model is saved", () => {
    expect(scriptsFor(config, saved, "simpletuner", "/o", "/o/checkpoint-4").map((s) => [s.kind, s.event])).toEqual([
      ["post_checkpoint", { localCheckpointPath: "/o/checkpoint-4", globalStep: 4 }],
      ["post_upload", { localCheckpointPath: "/o/checkpoint-4", globalStep: 4 }],
    ]);
    expect(scriptsFor(config, { type: "model.saved", data: { step: 8 } }, "simpletuner", "/o", "").map((s) => s.event)).toEqual([
      { localCheckpointPath: "/o", globalStep: 8 },
    ]);
    expect(scriptsFor(config, { type: "validation.started", data: { step: 4 } }, "simpletuner", "/o", "/o/checkpoint-4")).toEqual([
      { kind: "validation", command: "/opt/hooks/validate", event: { localCheckpointPath: "/o/checkpoint-4", globalStep: 4 } },
    ]);
  });

  it("SimpleTuner publishing to its hub: post-upload after each publication, with the hub's address", () => {
    const hub = { ...config, "--push_to_hub": true, "--hub_model_id": "acme/cats" };
    expect(scriptsFor(hub, saved, "simpletuner", "/o", "").map((s) => s.kind)).toEqual(["post_checkpoint"]);
    expect(scriptsFor(hub, { type: "upload.completed", data: { step: 8 } }, "simpletuner", "/o", "")[0]!.event).toEqual({
      localCheckpointPath: "/o",
      remoteCheckpointPath: "https://huggingface.co/acme/cats",
      globalStep: 8,
    });
  });

  it("other trainers: post-upload only on the upload.completed they report", () => {
    expect(scriptsFor(config, saved, "demo", "/o", "").map((s) => s.kind)).toEqual(["post_checkpoint"]);
    const upload = { type: "upload.completed", data: { step: 2, local_path: "/o/c", remote_path: "s3://b/c" } };
    expect(scriptsFor(config, upload, "declared", "/o", "")[0]!.event).toEqual({
      localCheckpointPath: "/o/c",
      remoteCheckpointPath: "s3://b/c",
      globalStep: 2,
    });
  });
});

describe("the end report", () => {
  const long = (n: number, c = "x") => c.repeat(n);

  it("fits the edge's schema whatever the trainer printed: each line keeps its start and end, the last lines stay", () => {
    const calledProcessError = `subprocess.CalledProcessError: Command '['/opt/st/bin/python3', ${long(1200, "a")}]' returned non-zero exit status 1.`;
    const lines = [...Array.from({ length: 80 }, (_, i) => `line ${i}`), calledProcessError];
    const fitted = fitReport({ status: "failed", exit_code: 1, error: long(5000, "e"), last_lines: lines });
    expect(JobFinish.safeParse(fitted).success).toBe(true);
    expect(fitted.error!.length).toBe(2000);
    expect(fitted.error).toContain("characters cut]");
    expect(fitted.last_lines).toHaveLength(50);
    expect(fitted.last_lines![0]).toBe("[… 32 earlier lines cut]");
    const cut = fitted.last_lines!.at(-1)!;
    expect(cut.length).toBeLessThanOrEqual(1000);
    expect(cut.startsWith("subprocess.CalledProcessError: Command '['/opt/st/bin/python3'")).toBe(true);
    expect(cut.endsWith("returned non-zero exit status 1.")).toBe(true);
    expect(cut).toMatch(/ … \[\d+ characters cut\] … /);
    // A report that fits is sent as it is.
    const small = { status: "failed" as const, exit_code: 1, error: "boom", last_lines: ["a", "b"] };
    expect(fitReport(small)).toEqual(small);
  });

  it("after a refusal: without its lines, then failed with the refusal as its reason", () => {
    const body = { status: "failed" as const, exit_code: 1, error: "boom", last_lines: ["a"] };
    expect(shortenedReport(body, "422 last_lines.0: too long")).toEqual({
      status: "failed",
      exit_code: 1,
      error: "boom (its full report was refused: 422 last_lines.0: too long)",
    });
    expect(shortenedReport({ status: "completed", exit_code: 0 }, "422 x")).toEqual({ status: "completed", exit_code: 0 });
    expect(refusalReport("422 status: invalid")).toEqual({
      status: "failed",
      error: "the edge refused this job's end report: 422 status: invalid",
    });
    for (const report of [shortenedReport(body, long(5000)), refusalReport(long(5000))])
      expect(JobFinish.safeParse(report).success).toBe(true);
  });

  it("names the error the trainer reported, with its traceback's end, else its last lines; an unasked interrupt is a failure", () => {
    const st = new TrainerEvents({ simpleTuner: true });
    st.translate({
      type: "error",
      title: "Training failed: OSError",
      message: "[Errno 30] Read-only",
      traceback: "Traceback (most recent call last):\n  File x\nOSError: [Errno 30] Read-only\n",
    });
    st.translate({ type: "training.status", status: "failed" });
    expect(endReport({ stopAsked: false, events: st }, 1, null, ["accelerate's noise"])).toEqual({
      status: "failed",
      exit_code: 1,
      error: "Training failed: OSError: [Errno 30] Read-only",
      last_lines: ["Traceback (most recent call last):", "  File x", "OSError: [Errno 30] Read-only"],
    });
    // SimpleTuner exits 0 after a KeyboardInterrupt: without a stop request that is no completed run.
    const interrupted = new TrainerEvents({ simpleTuner: true });
    interrupted.translate({ type: "training.status", status: "interrupted" });
    expect(endReport({ stopAsked: false, events: interrupted }, 0, null, ["x"])).toMatchObject({
      status: "failed",
      error: "the trainer was interrupted without a stop request (exit code 0)",
    });
    expect(endReport({ stopAsked: true, events: interrupted }, 0, null, [])).toEqual({ status: "completed", exit_code: 0 });
    expect(endReport({ stopAsked: false, events: new TrainerEvents() }, 0, null, [])).toEqual({ status: "completed", exit_code: 0 });
    expect(reportLines(null, ["a", "b"])).toEqual(["a", "b"]);
  });
});

describe("an event's size", () => {
  /** A PNG of noise (it does not compress), `size` pixels square, as a data URI. */
  const noisy = (size: number) => {
    const image = new PNG({ width: size, height: size });
    randomBytes(image.data.length).copy(image.data);
    return `data:image/png;base64,${PNG.sync.write(image).toString("base64")}`;
  };

  it("fits what the edge stores: a large validation image is halved until it fits, and still a picture", () => {
    const big = noisy(512); // about 1 MB of PNG as base64
    const event = { type: "validation.image", title: "Validation: cat", data: { step: 4 }, images: [{ src: big, mime_type: "image/png" }] };
    expect(JSON.stringify(event).length).toBeGreaterThan(MAX_EVENT_BYTES);
    const fitted = fitEvent(event);
    expect(JSON.stringify(fitted).length).toBeLessThanOrEqual(MAX_EVENT_BYTES);
    const src = (fitted.images as { src: string }[])[0]!.src;
    const picture = PNG.sync.read(Buffer.from(src.split(",")[1]!, "base64"));
    expect([picture.width, picture.height]).toEqual([256, 256]);
    expect(fitted).toMatchObject({ type: "validation.image", title: "Validation: cat", data: { step: 4 } });
    // One that fits goes as it is.
    const small = { type: "validation.image", images: [{ src: noisy(16), mime_type: "image/png" }] };
    expect(fitEvent(small)).toBe(small);
  });

  it("leaves out what it cannot scale, saying so, and cuts a huge text", () => {
    const jpeg = `data:image/jpeg;base64,${"A".repeat(MAX_EVENT_BYTES)}`;
    expect(fitEvent({ type: "validation.image", data: { step: 1 }, images: [{ src: jpeg, mime_type: "image/jpeg" }] })).toEqual({
      type: "validation.image",
      data: { step: 1, media_left_out: 1 },
      images: [],
    });
    const huge = fitEvent({ type: "log", message: "x".repeat(MAX_EVENT_BYTES), level: "error", extra: "y".repeat(10) });
    expect(huge).toEqual({
      type: "log",
      message: "x".repeat(4000),
      level: "error",
      data: { truncated: true, bytes: MAX_EVENT_BYTES + 64 },
    });
  });
});
