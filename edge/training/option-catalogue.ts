import { ADMIN_ONLY_OPTIONS } from "../../shared/admin-options";
import type { CatalogueOption, OptionType } from "../../shared/schemas/option-catalogue";
import { isSecretKey } from "../../shared/secrets-mask";
import { INLINE_REQUIRED, TRAINING_DEFAULTS } from "./options";

/*
 * The catalogue of training options this service knows (GET /api/training/options), shared by the
 * dashboard's environment form and the `jobs` CLI. It describes; the rules that refuse a value are
 * ./options.ts (POST /api/training/validate and every environment save), and a test holds each
 * option checked there to the same type here.
 *
 * Sources. Types, allowed values, SimpleTuner's defaults and help text were read from SimpleTuner's
 * own field registry (github.com/bghira/SimpleTuner at bc8e6ab77,
 * simpletuner/simpletuner_sdk/server/services/field_registry/sections/{model,training,memory,lora,
 * validation,logging_fields,publishing,advanced,data}.py, which cmd_args.py turns into its argparse
 * options) and written here as data, in our own words where ours differ. `default` is what this
 * service fills in (TRAINING_DEFAULTS) where it fills one in, else SimpleTuner's. The service's own
 * options (`--trainer`, `--trainer_command`, `--max_runtime_minutes`) come from edge/jobs and
 * shared/trainers.ts.
 */

type Entry = Omit<CatalogueOption, "name" | "admin_only" | "secret" | "required" | "default"> & {
  default?: CatalogueOption["default"];
};

const choice = (values: string[], help: string, extra: Partial<Entry> = {}): Entry => ({ type: "choice", allowed: values, help, ...extra });

const ENTRIES: Record<string, Entry> = {
  // The model (field_registry/sections/model.py, lora.py)
  "--model_family": {
    type: "string",
    help: "The architecture to train: sd1x, sdxl, sd3, flux, flux2, pixart, qwen_image, wan, ltxvideo, ... (SimpleTuner's model families); demo for the built-in demo trainer.",
  },
  "--model_flavour": { type: "string", help: "A variant of the model family, such as dev or schnell for flux, medium or large for sd3." },
  "--model_type": choice(["full", "lora"], "Train the whole model (full) or a LoRA adapter (lora).", { default: "full" }),
  "--lora_type": choice(["standard", "lycoris"], "Standard PEFT LoRA, or LyCORIS (LoKr, LoHa and others).", { default: "standard" }),
  "--lora_rank": {
    type: "integer",
    minimum: 1,
    default: 16,
    help: "Dimension of the LoRA update matrices: 4 to 32 for a style, 64 to 128 for a complex concept.",
  },
  "--lora_dropout": {
    type: "number",
    minimum: 0,
    default: 0.1,
    help: "Fraction of LoRA neurons dropped at random in training, against overfitting (typically 0 to 0.2).",
  },
  "--pretrained_model_name_or_path": {
    type: "string",
    help: "The base model: a Hugging Face model id or a directory on the box. Left out, the flavour decides.",
  },
  "--output_dir": {
    type: "string",
    default: "simpletuner-results",
    help: "Where checkpoints and logs are written: a relative path, inside the job's directory.",
  },
  "--data_backend_config": {
    type: "string",
    help: "The dataloader file (multidatabackend.json): a relative path, inside the job's directory. The environment's dataloader is written there.",
  },
  "--seed": { type: "integer", minimum: 0, help: "Seed for deterministic training; the same seed reproduces a run." },
  "--resume_from_checkpoint": {
    type: "string",
    help: 'Resume from "latest" or a named checkpoint such as checkpoint-500; left out, training starts from scratch.',
  },
  // The schedule (sections/training.py, memory.py)
  "--max_train_steps": {
    type: "integer",
    minimum: 0,
    help: "Stop after this many steps; 0 uses --num_train_epochs instead. Set one of the two.",
  },
  "--num_train_epochs": {
    type: "integer",
    minimum: 0,
    default: 1,
    help: "Passes over the whole dataset; 0 uses --max_train_steps instead. Set one of the two.",
  },
  "--train_batch_size": { type: "integer", minimum: 1, help: "Samples per forward and backward pass, per device." },
  "--gradient_accumulation_steps": {
    type: "integer",
    minimum: 1,
    help: "Steps whose gradients add up before one update: a larger effective batch without more memory.",
  },
  "--learning_rate": { type: "number", minimum: 0, maximum: 1, help: "Base learning rate, between 0 and 1 (typically 1e-6 to 1e-4)." },
  "--lr_scheduler": choice(
    ["linear", "sine", "cosine", "cosine_with_restarts", "polynomial", "constant", "constant_with_warmup"],
    "How the learning rate changes over the run.",
  ),
  "--lr_warmup_steps": {
    type: "integer",
    minimum: 0,
    default: 0,
    help: "Steps over which the learning rate rises from 0 to its base value.",
  },
  "--optimizer": {
    type: "string",
    default: "adamw_bf16",
    help: "The optimizer, as SimpleTuner names it: adamw_bf16, optimi-lion, prodigy, adafactor, ... (the box's SimpleTuner decides which exist).",
  },
  "--mixed_precision": choice(["no", "fp16", "bf16", "fp8"], "Precision of the training computations (a job on no GPU runs on the CPU).", {
    default: "bf16",
  }),
  // Not in SimpleTuner's field registry; its pipelines (simpletuner/helpers/legacy/pipeline.py) take clip_skip.
  "--clip_skip": {
    type: "integer",
    minimum: 0,
    help: "CLIP layers skipped from the end when encoding prompts (SD 1.x and SDXL; 2 is common for anime models).",
  },
  "--num_processes": {
    type: "integer",
    minimum: 0,
    maximum: 64,
    help: "Processes accelerate launches (one per GPU); at most 64. 0 runs on the CPU (the demo trainer).",
  },
  "--dataloader_prefetch": {
    type: "boolean",
    default: false,
    help: "Read latents, text embeds and metadata ahead of the batch that needs them.",
  },
  // Checkpoints (sections/training.py, logging_fields.py)
  "--checkpointing_steps": { type: "integer", minimum: 0, default: 500, help: "Save a checkpoint every this many steps." },
  "--checkpoints_total_limit": {
    type: "integer",
    minimum: 0,
    default: 5,
    help: "Checkpoints kept on disk; older ones are deleted (0: no limit).",
  },
  "--push_checkpoints_to_hub": {
    type: "boolean",
    default: false,
    help: "Also upload each checkpoint to the model's Hugging Face repository.",
  },
  // Validation (sections/validation.py)
  "--validation_prompt": { type: "string", help: "The prompt of the validation images made during training." },
  "--validation_steps": { type: "integer", minimum: 0, default: 100, help: "Make validation images every this many steps." },
  "--validation_num_inference_steps": {
    type: "integer",
    minimum: 1,
    default: 30,
    help: "Diffusion steps per validation image (20 to 30 is typical).",
  },
  "--validation_guidance": {
    type: "number",
    minimum: 0,
    default: 7.5,
    help: "Guidance scale of validation images (7 to 12 is typical; 1 for distilled models).",
  },
  "--validation_resolution": {
    type: "string",
    default: "256",
    help: "Size of validation images: 1024 or 1024x768, or a comma-separated list of them.",
  },
  "--validation_seed": { type: "integer", minimum: 0, help: "A fixed seed for validation images, so steps compare." },
  "--validation_preview": { type: "boolean", help: "Stream previews of validation images while they are made (live on the job page)." },
  "--validation_preview_steps": {
    type: "integer",
    minimum: 1,
    default: 1,
    help: "After the first preview, one every this many sampling steps.",
  },
  "--validation_method": choice(
    ["simpletuner-local", "external-script"],
    "Run validation in SimpleTuner's own pipeline, or call a script.",
    {
      default: "simpletuner-local",
    },
  ),
  "--validation_external_script": {
    type: "string",
    help: "The script run with --validation_method external-script ({local_checkpoint_path} and other placeholders).",
  },
  "--validation_external_background": {
    type: "boolean",
    default: false,
    help: "Start the external validation script and go on without waiting for it.",
  },
  // Reporting (sections/logging_fields.py)
  "--report_to": choice(
    ["simpletuner", "tensorboard", "wandb", "swanlab", "comet_ml", "custom-tracker", "all", "none"],
    "Where training metrics are logged, beside this service's own events.",
  ),
  "--webhook_config": {
    type: "json",
    help: 'Extra webhooks: a JSON array of objects such as {"webhook_type": "raw", "callback_url": "https://..."}; their addresses read back masked.',
  },
  "--webhook_reporting_interval": { type: "integer", minimum: 0, help: "Seconds between a webhook's progress reports." },
  // This service's own (edge/jobs/runtime.ts, shared/trainers.ts, shared/admin-options.ts)
  "--trainer": {
    type: "string",
    help: "Which trainer runs the job: simpletuner (the default), demo (the built-in demo trainer) or another the box declares.",
  },
  "--trainer_command": { type: "string", help: "A raw command the box runs instead of a declared trainer. Admins only." },
  // MAX_RUNTIME_MINUTES of edge/jobs/runtime.ts (a layer above this one; the catalogue's test holds them equal).
  "--max_runtime_minutes": {
    type: "integer",
    minimum: 1,
    maximum: 10_080,
    help: "How long the job may run before it is stopped, in minutes (1 to 10080, a week); the queue plans with it.",
  },
  "--hub_token": { type: "string", help: "A Hugging Face token for pushing the model; stored, and read back masked." },
};

/**
 * Every option the service knows, by name: type, default, allowed values, help, whether it is
 * required on a training form, admin-only or secret-looking (read back masked).
 *
 * @example
 * OPTION_CATALOGUE.find((o) => o.name === "--learning_rate")?.type; // "number"
 */
export const OPTION_CATALOGUE: readonly CatalogueOption[] = Object.entries(ENTRIES).map(([name, entry]) => ({
  name,
  type: entry.type,
  default: name in TRAINING_DEFAULTS ? TRAINING_DEFAULTS[name]! : (entry.default ?? null),
  ...(entry.allowed ? { allowed: entry.allowed } : {}),
  ...(entry.minimum !== undefined ? { minimum: entry.minimum } : {}),
  ...(entry.maximum !== undefined ? { maximum: entry.maximum } : {}),
  help: entry.help,
  required: (INLINE_REQUIRED as readonly string[]).includes(name),
  admin_only: (ADMIN_ONLY_OPTIONS as readonly string[]).includes(name),
  secret: isSecretKey(name),
}));

/** The catalogue's entry for an option, if it knows it. */
export function catalogueEntry(name: string): { type: OptionType } | undefined {
  return OPTION_CATALOGUE.find((option) => option.name === name);
}
