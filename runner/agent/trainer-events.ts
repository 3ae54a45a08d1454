/*
 * What a trainer says, in the service's words (README "The trainer protocol"). Every event a
 * trainer sends, on stdout or to its webhook callback, passes through one TrainerEvents per job
 * attempt, which answers the events to store and keeps what the runner acts on: whether training
 * has started, the last step, the checkpoints, and how the trainer itself said the run ended.
 *
 * The service's own vocabulary (training.started, training.progress, checkpoint.saved,
 * validation.started/image/completed, training.completed; the demo trainer speaks it) passes as
 * it is. SimpleTuner speaks another (recorded in test/fixtures/simpletuner/, from its
 * helpers/webhooks/events.py and train.py): progress is `training.status` with `progress`,
 * checkpoints `training.checkpoint`, phases `lifecycle.stage`, validation results
 * `training.validation` with bare base64 images, an uncaught error `error` then `training.status`
 * `failed`, a SIGINT `training.status` `interrupted`, and every log record also `log.message`.
 * Those are mapped here, so progress, expected ends, the loss plot, the previews and the
 * lifecycle webhooks work alike for every trainer.
 */

export type TrainerEvent = { type: string } & Record<string, unknown>;

/** How the trainer itself said its run ended, if it did. */
export type TrainerEnd = "completed" | "interrupted" | "failed";

/** The error a trainer reported (SimpleTuner's `error` event): its title, message and traceback. */
export interface TrainerError {
  title: string;
  message: string;
  traceback: string | null;
}

/** The longest traceback kept in an event (its end: where it failed). */
const MAX_TRACEBACK = 16_000;
/** A startup phase reporting progress is stored again once it moved this many percent. */
const STAGE_PERCENT_STEP = 10;

const record = (value: unknown): Record<string, unknown> =>
  value && typeof value === "object" && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
const num = (value: unknown): number | null => (typeof value === "number" && Number.isFinite(value) ? value : null);
const str = (value: unknown): string | null => (typeof value === "string" && value.trim() !== "" ? value : null);

/** SimpleTuner's severities as the service's event levels (info is the default and left out). */
function levelOf(severity: unknown): { level?: string } {
  if (severity === "warning") return { level: "warning" };
  if (severity === "error" || severity === "critical") return { level: "error" };
  return {};
}

/** The media type of a base64 image, from its first bytes (SimpleTuner sends PNG). */
function imageType(base64: string): string {
  if (base64.startsWith("/9j/")) return "image/jpeg";
  if (base64.startsWith("R0lGOD")) return "image/gif";
  if (base64.startsWith("UklGR")) return "image/webp";
  return "image/png";
}

/**
 * A trainer's images as job events carry them, `{src: data URI, mime_type}`: SimpleTuner's raw
 * webhooks carry bare base64 strings; items already in that shape are kept; anything else goes.
 *
 * @example
 * mediaItems(["iVBORw0KGgo..."]); // [{ src: "data:image/png;base64,iVBORw0KGgo...", mime_type: "image/png" }]
 */
export function mediaItems(value: unknown): { src: string; mime_type: string }[] {
  if (!Array.isArray(value)) return [];
  const out: { src: string; mime_type: string }[] = [];
  for (const item of value) {
    if (typeof item === "string" && item) {
      if (item.startsWith("data:")) out.push({ src: item, mime_type: item.slice(5, item.indexOf(";")) || "image/png" });
      else out.push({ src: `data:${imageType(item)};base64,${item}`, mime_type: imageType(item) });
      continue;
    }
    const r = record(item);
    if (typeof r.src === "string" && r.src.startsWith("data:"))
      out.push({ src: r.src, mime_type: str(r.mime_type) ?? (r.src.slice(5, r.src.indexOf(";")) || "image/png") });
  }
  return out;
}

/** The step of a checkpoint from its folder's name (`.../checkpoint-400`). */
function checkpointStep(path: string | null): number | null {
  const match = path ? /checkpoint-(\d+)\/?$/.exec(path) : null;
  return match ? Number(match[1]) : null;
}

/**
 * The events of one job attempt's trainer, translated and remembered.
 *
 * @example
 * const events = new TrainerEvents({ simpleTuner: true });
 * events.translate({ type: "training.checkpoint", checkpoint: { path: "/o/checkpoint-4", is_final: false } });
 * // [{ type: "checkpoint.saved", title: "Checkpoint saved at step 4", data: { step: 4, path: "/o/checkpoint-4", is_final: false } }]
 */
export class TrainerEvents {
  /** Training has begun (a first step is under way): a checkpoint can be asked for. */
  started = false;
  /** The last step the trainer reported. */
  step: number | null = null;
  private total: number | null = null;
  /** How many checkpoints it has reported saved. */
  checkpoints = 0;
  /** How the trainer said the run ended; null while it has not. */
  end: TrainerEnd | null = null;
  /** The last error it reported (SimpleTuner's `error` event). */
  error: TrainerError | null = null;
  private lastProgressStep: number | null = null;
  private finalValidation = false;
  private lastStage: { key: string; status: string; bucket: number } | null = null;

  /**
   * `simpleTuner`: the trainer is SimpleTuner, which prints every log record as well as posting it
   * as `log.message`; the printed line is kept (with the lines no record carries: accelerate's,
   * tracebacks), the posted copy dropped. Another trainer's `log.message` becomes a log event.
   */
  constructor(private readonly options: { simpleTuner: boolean } = { simpleTuner: false }) {}

  /** The events to store for one event of the trainer's (none, one or several). */
  translate(raw: TrainerEvent): TrainerEvent[] {
    const out = this.map(raw);
    for (const event of out) this.remember(event);
    return out;
  }

  private remember(event: TrainerEvent): void {
    const data = record(event.data);
    switch (event.type) {
      case "training.started":
        this.started = true;
        this.total = num(data.total_steps) ?? this.total;
        break;
      case "training.progress":
        this.started = true;
        this.step = num(data.step) ?? this.step;
        this.total = num(data.total_steps) ?? this.total;
        break;
      case "checkpoint.saved":
        this.checkpoints++;
        break;
      case "training.completed":
        this.end = "completed";
        break;
      case "training.status":
        if (data.status === "interrupted" || data.status === "failed") this.end = data.status;
        break;
    }
  }

  private map(raw: TrainerEvent): TrainerEvent[] {
    switch (raw.type) {
      case "training.status":
        return this.status(raw);
      case "training.checkpoint":
        return [this.checkpoint(raw)];
      case "lifecycle.stage":
        return this.stage(raw);
      case "training.validation":
        return this.validationImages(raw);
      case "validation.image":
      case "validation.completed":
        return [this.withMedia(raw)];
      case "error":
        return [this.errorEvent(raw)];
      case "log.message":
        if (this.options.simpleTuner) return [];
        return [
          { type: "log", message: String(raw.message ?? ""), ...levelOf(raw.severity), ...(str(raw.logger) ? { logger: raw.logger } : {}) },
        ];
      case "notification":
        return [this.plain(raw, "notification")];
      default:
        return [this.withMedia(raw)];
    }
  }

  /** An event of SimpleTuner's vocabulary that needs no mapping, without its own bookkeeping (job_id, its clock, severity). */
  private plain(raw: TrainerEvent, type = raw.type): TrainerEvent {
    const { job_id: _job, timestamp: _at, severity, data, ...rest } = raw;
    // SimpleTuner's "Training Config" notification carries the whole configuration: the job's own
    // options, already in the job, which need not be stored again with each run.
    const keep = type === "notification" ? {} : data === undefined ? {} : { data };
    return { ...rest, type, ...keep, ...levelOf(severity) };
  }

  private withMedia(raw: TrainerEvent): TrainerEvent {
    const event = this.plain(raw);
    if ("images" in raw) event.images = mediaItems(raw.images);
    if ("videos" in raw) event.videos = mediaItems(raw.videos);
    return event;
  }

  private status(raw: TrainerEvent): TrainerEvent[] {
    const data = record(raw.data);
    const progress = record(raw.progress);
    // SimpleTuner's ends and publishing states are a top-level `status`; its progress is `data.status` "running".
    const status = str(raw.status);
    if (status === "interrupted")
      return [
        {
          type: "training.status",
          title: `Training interrupted${this.step !== null ? ` at step ${this.step}` : ""}`,
          data: { status: "interrupted", step: this.step },
        },
      ];
    if (status === "failed")
      return [
        {
          type: "training.status",
          title: `Training failed${this.step !== null ? ` at step ${this.step}` : ""}`,
          level: "error",
          data: { status: "failed", step: this.step },
        },
      ];
    if (status === "model_available")
      return [{ type: "upload.completed", title: "The model was published to its hub", data: { step: this.step } }];
    const step = num(data.global_step) ?? num(progress.current);
    if (data.status !== "running" || step === null) return [this.plain(raw)];
    const metrics = record(progress.metrics);
    const total = num(data.total_num_steps) ?? num(progress.total);
    const out: TrainerEvent[] = [];
    if (!this.started)
      out.push({
        type: "training.started",
        title: "Training started",
        data: { total_steps: total, resumed_from_step: num(data.global_resume_step) ?? 0, epochs: num(data.total_num_epochs) },
      });
    // Step 0 is the start (no loss yet); a step already reported (SimpleTuner repeats its last one) adds nothing.
    if (step > 0 && step !== this.lastProgressStep) {
      this.lastProgressStep = step;
      out.push({
        type: "training.progress",
        title: `Step ${step}${total !== null ? `/${total}` : ""}`,
        data: {
          step,
          total_steps: total,
          epoch: num(metrics.epoch) ?? num(data.current_epoch),
          loss: num(metrics.loss),
          learning_rate: num(metrics.learning_rate),
          percent: num(progress.percent),
          eta_seconds: num(progress.eta_seconds),
          seconds_per_step: num(metrics.seconds_per_step),
        },
      });
    }
    return out;
  }

  private checkpoint(raw: TrainerEvent): TrainerEvent {
    const checkpoint = record(raw.checkpoint);
    const path = str(checkpoint.path);
    const step = checkpointStep(path) ?? this.step;
    return {
      type: "checkpoint.saved",
      title: `Checkpoint saved${step !== null ? ` at step ${step}` : ""}`,
      data: { step, path, is_final: checkpoint.is_final === true },
    };
  }

  private stage(raw: TrainerEvent): TrainerEvent[] {
    const stage = record(raw.stage);
    const key = str(stage.key) ?? "stage";
    const status = str(stage.status) ?? "running";
    const step = this.step;
    if (key === "validation" || key === "final_validation") {
      const final = key === "final_validation";
      this.finalValidation = final && status === "running";
      const what = final ? "Final validation" : "Validation";
      const at = step !== null ? ` at step ${step}` : "";
      const data = { step, ...(final ? { final: true } : {}) };
      if (status === "running") return [{ type: "validation.started", title: `${what}${at}`, data }];
      if (status === "completed") return [{ type: "validation.completed", title: `${what} done${at}`, data }];
      return [
        {
          type: `validation.${status}`,
          title: str(raw.title) ?? `${what} ${status}${at}`,
          data,
          ...levelOf(status === "failed" ? "error" : ""),
        },
      ];
    }
    if (key === "training_complete" && status === "completed")
      return [{ type: "training.completed", title: "Training completed", data: { step, total_steps: this.total } }];
    if (key === "model_save" && status === "completed")
      return [{ type: "model.saved", title: str(raw.title) ?? "Model saved", data: { step } }];
    // A save's start opens the checkpoint phase (no stall while it lasts); its end is told by the training.checkpoint that follows it, unless it failed.
    if (key === "checkpoint_save" && status === "running")
      return [{ type: "checkpoint.started", title: `Saving a checkpoint${step !== null ? ` at step ${step}` : ""}`, data: { step } }];
    if (key === "checkpoint_save" && status !== "failed") return [];
    // Startup phases: each change of phase or status, and progress within one every 10 percent.
    const progress = record(stage.progress);
    const percent = num(progress.percent);
    const bucket = percent === null ? -1 : Math.floor(percent / STAGE_PERCENT_STEP);
    const last = this.lastStage;
    if (last && last.key === key && last.status === status && last.bucket === bucket) return [];
    this.lastStage = { key, status, bucket };
    return [
      {
        type: "training.stage",
        title: str(raw.title) ?? str(stage.label) ?? key,
        data: {
          key,
          label: str(stage.label),
          status,
          current: num(progress.current),
          total: num(progress.total),
          percent,
        },
        ...levelOf(status === "failed" ? "error" : raw.severity),
      },
    ];
  }

  /** A validation result: one event per image, so each stays within the event size the edge takes. */
  private validationImages(raw: TrainerEvent): TrainerEvent[] {
    const title = str(raw.message) ?? str(raw.title) ?? "Validation";
    const prompt = /^Validation: (.*)$/.exec(title)?.[1] ?? null;
    const media = [...mediaItems(raw.images), ...mediaItems(raw.videos)];
    const data = { step: this.step, validation_type: this.finalValidation ? "final" : "validation", prompt };
    if (!media.length) return [{ type: "validation.image", title, data, images: [] }];
    return media.map((item) => ({
      type: "validation.image",
      title,
      ...(prompt ? { body: prompt } : {}),
      data,
      [item.mime_type.startsWith("video/") ? "videos" : "images"]: [item],
    }));
  }

  private errorEvent(raw: TrainerEvent): TrainerEvent {
    const title = str(raw.title) ?? "Error";
    const message = typeof raw.message === "string" ? raw.message : "";
    const full = typeof raw.traceback === "string" ? raw.traceback : null;
    const traceback = full && full.length > MAX_TRACEBACK ? full.slice(-MAX_TRACEBACK) : full;
    this.error = { title, message, traceback };
    return { type: "training.error", title, message, level: "error", data: { traceback } };
  }
}
