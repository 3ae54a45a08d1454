import { previewSteps } from "../../shared/preview";
import { loadCheckpoint, saveCheckpoint } from "./checkpoints";
import { SIGNAL_FILE_ENV } from "../../shared/trainer-commands";
import { SignalWatcher } from "./signals";
import { initialWeights, loss, step as sgdStep, syntheticData, type Weights } from "./model";
import { flag, int, num, parseArgs, text } from "./options";
import { parseResolution, renderPreview } from "./preview";

/*
 * The built-in demo trainer: a real, tiny CPU training loop speaking the trainer protocol.
 * Events go out as JSON lines (one object with a `type` per line); anything else a trainer
 * prints is a log line. Validations and checkpoints are asked through SimpleTuner's signal file
 * (signals.ts) and happen after the step in progress, one per request. SIGINT (the runner's
 * "stop", Ctrl-C) or SIGTERM: the step finishes, a `training.status` `interrupted` event goes
 * out as SimpleTuner sends one on KeyboardInterrupt, and the trainer exits 0 without a final
 * checkpoint or validation (the last scheduled or requested checkpoint is where a resume starts).
 */

export interface TrainerEvent {
  type: string;
  title: string;
  body?: string;
  data: Record<string, unknown>;
  images?: { src: string; mime_type: string }[];
}

export interface TrainerIo {
  emit(event: TrainerEvent): void;
  log(line: string): void;
  env: Record<string, string | undefined>;
  sleep(ms: number): Promise<void>;
  /** The signal the process was asked to stop with (SIGINT or SIGTERM), null while none came. */
  stopRequested(): NodeJS.Signals | null;
}

export async function runDemoTrainer(argv: string[], io: TrainerIo): Promise<"completed" | "interrupted"> {
  const o = parseArgs(argv);
  const outputDir = text(o, "--output_dir", "");
  if (!outputDir) throw new Error("--output_dir is required");
  const maxSteps = int(o, "--max_train_steps", 0);
  const epochs = int(o, "--num_train_epochs", 0);
  if (maxSteps === 0 && epochs === 0) throw new Error("set --max_train_steps or --num_train_epochs (the other one 0)");
  const seed = int(o, "--seed", 42);
  const batchSize = int(o, "--train_batch_size", 16, 1);
  const learningRate = num(o, "--learning_rate", 0.05);
  const data = syntheticData(seed);
  const stepsPerEpoch = Math.ceil(data.y.length / batchSize);
  const totalSteps = maxSteps > 0 ? maxSteps : epochs * stepsPerEpoch;
  const checkpointEvery = int(o, "--checkpointing_steps", 0);
  const keep = int(o, "--checkpoints_total_limit", 0);
  const validationEvery = int(o, "--validation_steps", 0);
  const inferenceSteps = int(o, "--validation_num_inference_steps", 20, 1);
  const preview = flag(o, "--validation_preview");
  const previewInterval = int(o, "--validation_preview_steps", 1, 1);
  const resolution = parseResolution(o.get("--validation_resolution"));
  const prompt = text(o, "--validation_prompt", "a demo validation image");
  const stepMs = int(o, "--demo_step_ms", 200);
  const signals = new SignalWatcher(io.env[SIGNAL_FILE_ENV]);

  let weights: Weights = initialWeights();
  let done = 0;
  const resume = o.get("--resume_from_checkpoint");
  if (resume) {
    const found = loadCheckpoint(outputDir, resume);
    if (found) {
      weights = found.weights;
      done = found.step;
      io.log(`resuming from checkpoint at step ${done}`);
    } else io.log(`no checkpoint to resume from in ${outputDir}; starting from step 0`);
  }
  io.emit({
    type: "training.started",
    title: "Training started",
    data: {
      job_id: io.env.TRAINER_JOB_ID ?? null,
      total_steps: totalSteps,
      resumed_from_step: done,
      cuda_visible_devices: io.env.CUDA_VISIBLE_DEVICES ?? null,
    },
  });

  let lastCheckpoint = -1;
  const checkpoint = (onDemand: boolean) => {
    const { path, removed } = saveCheckpoint(outputDir, { step: done, weights, loss: loss(weights, data), seed }, keep);
    lastCheckpoint = done;
    io.emit({
      type: "checkpoint.saved",
      title: `Checkpoint saved at step ${done}`,
      data: { step: done, path, removed, on_demand: onDemand },
    });
  };
  const validate = async (onDemand: boolean) => {
    io.emit({ type: "validation.started", title: `Validation at step ${done}`, body: prompt, data: { step: done, on_demand: onDemand } });
    const schedule = new Set(preview ? previewSteps(inferenceSteps, previewInterval) : []);
    let image = "";
    for (let s = 1; s <= inferenceSteps; s++) {
      if (!schedule.has(s) && s !== inferenceSteps) continue;
      image = renderPreview(weights, s, inferenceSteps, resolution, seed + done);
      if (!schedule.has(s)) continue;
      io.emit({
        type: "validation.image",
        title: `Validation preview ${s}/${inferenceSteps}`,
        body: prompt,
        data: {
          step: s,
          timestep: Math.round(1000 * (1 - s / inferenceSteps) * 100) / 100,
          resolution,
          validation_type: "intermediary",
          prompt,
          step_label: `${s}/${inferenceSteps}`,
        },
        images: [{ src: image, mime_type: "image/png" }],
      });
    }
    io.emit({
      type: "validation.completed",
      title: `Validation done at step ${done}`,
      body: prompt,
      data: { step: done, loss: loss(weights, data), on_demand: onDemand },
      images: [{ src: image, mime_type: "image/png" }],
    });
  };

  const interrupted = (signal: NodeJS.Signals) => {
    io.emit({
      type: "training.status",
      title: `Training interrupted at step ${done}`,
      data: { status: "interrupted", step: done, total_steps: totalSteps, signal },
    });
    return "interrupted" as const;
  };
  while (done < totalSteps) {
    // A stop that came between steps: no new step starts.
    const before = io.stopRequested();
    if (before) return interrupted(before);
    const batchLoss = sgdStep(weights, data, (done * batchSize) % data.y.length, batchSize, learningRate);
    done++;
    io.emit({
      type: "training.progress",
      title: `Step ${done}/${totalSteps}`,
      data: {
        step: done,
        total_steps: totalSteps,
        epoch: Math.floor((done - 1) / stepsPerEpoch) + 1,
        loss: batchLoss,
        learning_rate: learningRate,
        percent: Math.round((done / totalSteps) * 1000) / 10,
      },
    });
    // What was asked during this step happens now, after it: "after the next gradient synchronisation".
    const { owed, warning } = signals.check();
    if (warning) io.log(warning);
    // One action per request; a scheduled one at the same step is covered by a requested one.
    for (let i = 0; i < owed.validation; i++) await validate(true);
    if (!owed.validation && validationEvery > 0 && done % validationEvery === 0) await validate(false);
    for (let i = 0; i < owed.checkpoint; i++) checkpoint(true);
    if (!owed.checkpoint && checkpointEvery > 0 && done % checkpointEvery === 0) checkpoint(false);
    const stop = io.stopRequested();
    if (stop) return interrupted(stop);
    if (done < totalSteps && stepMs > 0) await io.sleep(stepMs);
  }
  if (lastCheckpoint !== done) checkpoint(false);
  await validate(false);
  io.emit({
    type: "training.completed",
    title: "Training completed",
    data: { step: done, total_steps: totalSteps, loss: loss(weights, data), output_dir: outputDir },
  });
  return "completed";
}
