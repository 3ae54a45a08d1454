// What the runner makes of what real SimpleTuner sends: the recordings of real runs
// (test/fixtures/simpletuner/, SimpleTuner 4.8.0's raw webhooks) through TrainerEvents, the pure
// translation every trainer's events pass (runner/agent/trainer-events.ts). The same recordings go
// through a real runner and edge in test/runner/simpletuner.test.ts.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { mediaItems, TrainerEvents, type TrainerEvent } from "../../runner/agent/trainer-events";
import { lineToEvent } from "../../runner/agent/events";

const recording = (name: string) =>
  readFileSync(`test/fixtures/simpletuner/${name}`, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as TrainerEvent);

function translateAll(name: string, simpleTuner = true) {
  const events = new TrainerEvents({ simpleTuner });
  const out = recording(name).flatMap((raw) => events.translate(raw));
  return { events, out, types: out.map((e) => e.type) };
}

describe("a recorded SimpleTuner run, translated", () => {
  it("starts once, reports every optimizer step once as training.progress with its loss, rate and ETA", () => {
    const { out } = translateAll("webhooks-lora-run.jsonl");
    const started = out.filter((e) => e.type === "training.started");
    expect(started).toEqual([
      { type: "training.started", title: "Training started", data: { total_steps: 8, resumed_from_step: 0, epochs: 1 } },
    ]);
    const progress = out.filter((e) => e.type === "training.progress");
    // Step 8 is posted twice by SimpleTuner (after the step and before the final checkpoint): stored once.
    expect(progress.map((e) => (e.data as any).step)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    expect(progress[0]).toEqual({
      type: "training.progress",
      title: "Step 1/8",
      data: {
        step: 1,
        total_steps: 8,
        epoch: 1,
        loss: 1.2108274698257446,
        learning_rate: 0.0001,
        percent: 12.5,
        eta_seconds: 26.13269196999773,
        seconds_per_step: 3.7332417099996746,
      },
    });
    // training.started comes before the first step.
    expect(out.findIndex((e) => e.type === "training.started")).toBeLessThan(out.indexOf(progress[0]!));
  });

  it("turns training.checkpoint into checkpoint.saved with the step from its folder, the validation phases into validation events, and the end into training.completed", () => {
    const { out, events } = translateAll("webhooks-lora-run.jsonl");
    expect(out.filter((e) => e.type === "checkpoint.saved")).toEqual([
      {
        type: "checkpoint.saved",
        title: "Checkpoint saved at step 4",
        data: { step: 4, path: "/srv/run/out/checkpoint-4", is_final: false },
      },
      {
        type: "checkpoint.saved",
        title: "Checkpoint saved at step 8",
        data: { step: 8, path: "/srv/run/out/checkpoint-8", is_final: false },
      },
    ]);
    const validation = out.filter((e) => e.type.startsWith("validation."));
    expect(validation.map((e) => `${e.type}:${(e.data as any).step}:${(e.data as any).final ?? false}`)).toEqual([
      "validation.started:4:false",
      "validation.image:4:false",
      "validation.image:4:false",
      "validation.completed:4:false",
      "validation.started:8:true",
      "validation.completed:8:true",
    ]);
    expect(out.filter((e) => e.type === "model.saved")).toEqual([
      { type: "model.saved", title: "Model saved to /srv/run/out", data: { step: 8 } },
    ]);
    expect(out.at(-1)).toEqual({ type: "training.completed", title: "Training completed", data: { step: 8, total_steps: 8 } });
    expect(events).toMatchObject({ started: true, step: 8, checkpoints: 2, end: "completed", error: null });
  });

  it("gives validation images as data URIs with their media type, one image per event, named by prompt", () => {
    const { out } = translateAll("webhooks-lora-run.jsonl");
    const images = out.filter((e) => e.type === "validation.image");
    expect(images.map((e) => [e.title, e.body, (e.data as any).prompt, (e.data as any).validation_type])).toEqual([
      ["Validation: unconditional", "unconditional", "unconditional", "validation"],
      ["Validation: validation", "validation", "validation", "validation"],
    ]);
    for (const event of images) {
      const [image] = event.images as { src: string; mime_type: string }[];
      expect(image!.mime_type).toBe("image/png");
      expect(image!.src).toMatch(/^data:image\/png;base64,iVBORw0KGgo/);
      // A real PNG: its signature decodes from the data URI.
      expect(Buffer.from(image!.src.split(",")[1]!, "base64").subarray(0, 8)).toEqual(Buffer.from("89504e470d0a1a0a", "hex"));
    }
  });

  it("keeps one copy of each log line: SimpleTuner's posted log.message records go, the printed lines stay", () => {
    const { types } = translateAll("webhooks-lora-run.jsonl");
    expect(types).not.toContain("log.message");
    expect(types).not.toContain("log");
    // Nothing of SimpleTuner's own vocabulary is left.
    for (const raw of ["lifecycle.stage", "training.checkpoint", "training.validation", "error"]) expect(types).not.toContain(raw);
    // The printed line becomes one log event, with the level it says it has.
    const printed = readFileSync("test/fixtures/simpletuner/completed-run-stdout.txt", "utf8").split("\n");
    const warning = printed.find((l) => l.includes("requires an alignment value of 64px"))!;
    expect(lineToEvent(warning)).toEqual({
      type: "log",
      message:
        "[RANK 0] 2026-11-27 05:37:33,064 [WARNING] Stable Diffusion 1.x requires an alignment value of 64px. Overriding the value of --aspect_bucket_alignment.",
      level: "warning",
    });
    expect(lineToEvent(printed.find((l) => l.includes("Setting Stable Diffusion 1.x prediction type"))!)).not.toHaveProperty("level");
    // Another trainer's log.message is its log: kept.
    expect(new TrainerEvents().translate({ type: "log.message", logger: "x", message: "hello", severity: "warning" })).toEqual([
      { type: "log", message: "hello", level: "warning", logger: "x" },
    ]);
  });

  it("stores start-up phases as training.stage, at most every 10 percent of a phase's progress, without the whole configuration", () => {
    const { out } = translateAll("webhooks-lora-run.jsonl");
    const stages = out.filter((e) => e.type === "training.stage");
    const caching = stages.filter((e) => (e.data as any).key === "init_cache_text_embeds_status_update");
    // SimpleTuner sends 10 updates for 8 captions; each 10 percent bucket is stored once.
    expect(caching.map((e) => (e.data as any).percent)).toEqual([0, 12, 25, 37, 50, 62, 75, 87, 100]);
    expect(stages.find((e) => (e.data as any).key === "init_load_base_model")).toEqual({
      type: "training.stage",
      title: "Loading model: `/models/tiny-sd1x`...",
      data: { key: "init_load_base_model", label: "Loading base model", status: "running", current: null, total: null, percent: null },
    });
    // The "Training Config" notification carries SimpleTuner's whole configuration: not stored again.
    const config = out.find((e) => e.type === "notification" && e.title === "Training Config");
    expect(config).toEqual({ type: "notification", message: "Training configuration initialized", title: "Training Config" });
    // No event carries SimpleTuner's own job id or clock.
    for (const e of out) expect(Object.keys(e)).not.toEqual(expect.arrayContaining(["job_id"]));
    for (const e of out) expect(e).not.toHaveProperty("timestamp");
  });

  it("an interrupted run ends interrupted at the step it reached", () => {
    const { out, events } = translateAll("webhooks-interrupted-run.jsonl");
    expect(out.filter((e) => e.type === "training.status")).toEqual([
      { type: "training.status", title: "Training interrupted at step 3", data: { status: "interrupted", step: 3 } },
    ]);
    // The checkpoint asked for through the signal file at step 1.
    expect(out.filter((e) => e.type === "checkpoint.saved").map((e) => (e.data as any).step)).toEqual([1]);
    expect(events.end).toBe("interrupted");
  });

  it("a failed run keeps SimpleTuner's error with its traceback, and ends failed", () => {
    const { out, events } = translateAll("failed-run-webhooks.jsonl");
    const error = out.find((e) => e.type === "training.error")!;
    expect(error).toMatchObject({
      title: "Training failed: OSError",
      message: "[Errno 30] Read-only file system: '/var/lib/training-runner/cache/datasets/tiny-st/.tmp-2ffr1nhu'",
      level: "error",
    });
    expect((error.data as any).traceback).toMatch(/^Traceback \(most recent call last\):/);
    expect(out.filter((e) => e.type === "training.status")).toEqual([
      { type: "training.status", title: "Training failed", level: "error", data: { status: "failed", step: null } },
    ]);
    expect(out.filter((e) => e.type === "training.stage" && e.level === "error").map((e) => (e.data as any).key)).toEqual([
      "init_data_backend",
    ]);
    expect(events.end).toBe("failed");
    expect(events.error).toMatchObject({ title: "Training failed: OSError", traceback: expect.stringContaining("OSError: [Errno 30]") });
    expect(events.started).toBe(false);
  });

  it("passes the service's own vocabulary as it is (the demo trainer's), and remembers what it says", () => {
    const events = new TrainerEvents();
    const own: TrainerEvent[] = [
      { type: "training.started", title: "Training started", data: { total_steps: 4 } },
      { type: "training.progress", title: "Step 1/4", data: { step: 1, total_steps: 4, loss: 0.5 } },
      { type: "checkpoint.saved", title: "Checkpoint saved at step 1", data: { step: 1, path: "/o/checkpoint-1" } },
      { type: "validation.image", data: { step: 1 }, images: [{ src: "data:image/png;base64,iVBORw0KGgo=", mime_type: "image/png" }] },
      { type: "training.status", title: "Training interrupted at step 1", data: { status: "interrupted", step: 1, signal: "SIGINT" } },
    ];
    expect(own.flatMap((e) => events.translate(e))).toEqual(own);
    expect(events).toMatchObject({ started: true, step: 1, checkpoints: 1, end: "interrupted" });
  });

  it("keeps only images that are base64 or data URIs, and publishes to the hub as upload.completed", () => {
    expect(mediaItems(["/9j/4AAQ", "R0lGODlh", { src: "javascript:alert(1)" }, { src: "data:image/gif;base64,R0lGOD" }, 7, null])).toEqual([
      { src: "data:image/jpeg;base64,/9j/4AAQ", mime_type: "image/jpeg" },
      { src: "data:image/gif;base64,R0lGODlh", mime_type: "image/gif" },
      { src: "data:image/gif;base64,R0lGOD", mime_type: "image/gif" },
    ]);
    expect(
      new TrainerEvents({ simpleTuner: true }).translate({ type: "training.status", status: "model_available", severity: "info" }),
    ).toEqual([{ type: "upload.completed", title: "The model was published to its hub", data: { step: null } }]);
  });
});
