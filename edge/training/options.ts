import { webhookLimitProblems } from "../webhooks/targets";

/*
 * Training forms (POST /api/training/validate and /start): their `--` options, checked field by
 * field.
 * Pure functions: the routes parse the multipart form into an option map and call these.
 */

export type OptionMap = Record<string, string | number | boolean | null>;

/**
 * Required of a training form (an inline run: the form is the whole configuration), with
 * one of --num_train_epochs and --max_train_steps.
 */
export const INLINE_REQUIRED = [
  "--model_family",
  "--model_type",
  "--pretrained_model_name_or_path",
  "--output_dir",
  "--data_backend_config",
] as const;

/** What validate and start fill in where the form says nothing (listed in their route descriptions). */
export const TRAINING_DEFAULTS: OptionMap = {
  "--train_batch_size": 1,
  "--gradient_accumulation_steps": 1,
  "--learning_rate": 0.0001,
  "--lr_scheduler": "constant",
  "--seed": 42,
  "--num_processes": 1,
  "--validation_preview": false,
  "--report_to": "none",
};

export interface FieldProblem {
  field: string;
  message: string;
}

const BOTH_EPOCHS_AND_STEPS: readonly FieldProblem[] = [
  { field: "--num_train_epochs", message: "set either --num_train_epochs or --max_train_steps; the other must be 0" },
  { field: "--max_train_steps", message: "set either --max_train_steps or --num_train_epochs; the other must be 0" },
];

/** Form values are strings; these options are numbers (whole or not) and booleans. */
const WHOLE = new Set([
  "--train_batch_size",
  "--gradient_accumulation_steps",
  "--lr_warmup_steps",
  "--seed",
  "--checkpoints_total_limit",
  "--checkpointing_steps",
  "--validation_steps",
  "--validation_num_inference_steps",
  "--validation_seed",
  "--validation_preview_steps",
  "--max_train_steps",
  "--num_train_epochs",
  "--lora_rank",
  "--num_processes",
  "--clip_skip",
  "--webhook_reporting_interval",
]);
const NUMBER = new Set(["--learning_rate", "--lora_dropout", "--validation_guidance"]);
const BOOLEAN = new Set(["--validation_preview", "--push_checkpoints_to_hub", "--validation_external_background", "--dataloader_prefetch"]);
/** The type each option checked here must have: the option catalogue (./option-catalogue.ts) is held to it. */
export const CHECKED_TYPES: Readonly<Record<string, "integer" | "number" | "boolean">> = Object.fromEntries([
  ...[...WHOLE].map((name) => [name, "integer" as const]),
  ...[...NUMBER].map((name) => [name, "number" as const]),
  ...[...BOOLEAN].map((name) => [name, "boolean" as const]),
]);
/** The least value of an option beyond "not negative". */
export const MINIMUM: Readonly<Record<string, number>> = {
  "--train_batch_size": 1,
  "--gradient_accumulation_steps": 1,
  "--validation_num_inference_steps": 1,
  "--validation_preview_steps": 1,
  "--lora_rank": 1,
};

/** Form strings to typed values where the option is known to be a number or a boolean. */
export function typedOptions(raw: Record<string, string>): { options: OptionMap; problems: FieldProblem[] } {
  const options: OptionMap = {};
  const problems: FieldProblem[] = [];
  for (const [field, text] of Object.entries(raw)) {
    const value = text.trim();
    if (WHOLE.has(field) || NUMBER.has(field)) {
      if (value === "") continue;
      const n = Number(value);
      if (!Number.isFinite(n) || (WHOLE.has(field) && !Number.isInteger(n)))
        problems.push({ field, message: `must be a ${WHOLE.has(field) ? "whole number" : "number"}, not ${JSON.stringify(text)}` });
      else options[field] = n;
    } else if (BOOLEAN.has(field)) {
      const v = value.toLowerCase();
      if (["true", "1", "on", "yes"].includes(v)) options[field] = true;
      else if (["false", "0", "off", "no", ""].includes(v)) options[field] = false;
      else problems.push({ field, message: `must be true or false, not ${JSON.stringify(text)}` });
    } else options[field] = text;
  }
  return { options, problems };
}

/**
 * Checks a complete option map; `inline`: the map is a whole configuration on its own (a training
 * form), so INLINE_REQUIRED must all be there. Also settles the rule that of
 * --num_train_epochs and --max_train_steps the one not used is 0 (returns the map with that
 * applied). Each problem names its field; both of epochs and steps set names both.
 */
export function checkOptions(input: OptionMap, inline: boolean): { options: OptionMap; problems: FieldProblem[] } {
  const options = { ...input };
  const problems: FieldProblem[] = [];
  const has = (f: string) => options[f] !== undefined && options[f] !== null && options[f] !== "";
  const required = "required: the form is the whole configuration (nothing is taken from an environment)";
  if (inline) for (const f of INLINE_REQUIRED) if (!has(f)) problems.push({ field: f, message: required });
  const steps = Number(options["--max_train_steps"] ?? 0);
  const epochs = Number(options["--num_train_epochs"] ?? 0);
  if (steps > 0 && epochs > 0) problems.push(...BOTH_EPOCHS_AND_STEPS);
  else if (steps <= 0 && epochs <= 0)
    problems.push({ field: "--max_train_steps", message: "set --max_train_steps or --num_train_epochs (a positive number)" });
  else if (steps > 0) options["--num_train_epochs"] = 0;
  else options["--max_train_steps"] = 0;
  problems.push(...optionValueProblems(options));
  if (options["--validation_method"] === "external-script" && !has("--validation_external_script"))
    problems.push({ field: "--validation_external_script", message: "required with --validation_method external-script" });
  return { options, problems };
}

/**
 * The rules on each option's value alone (not on what a whole configuration must hold): signs and
 * minimums, the learning rate, resolutions, checkpoint names, relative paths, webhooks.
 * checkOptions applies them, and so does every environment save.
 *
 * @example
 * optionValueProblems({ "--learning_rate": 2 }); // [{ field: "--learning_rate", message: "must be between 0 and 1 (for example 0.0001)" }]
 */
export function optionValueProblems(options: OptionMap): FieldProblem[] {
  const problems: FieldProblem[] = [];
  const has = (f: string) => options[f] !== undefined && options[f] !== null && options[f] !== "";
  for (const [field, value] of Object.entries(options)) {
    if (!field.startsWith("--")) problems.push({ field, message: 'option names start with "--"' });
    if (typeof value === "number") {
      if (value < 0) problems.push({ field, message: "must not be negative" });
      else if (MINIMUM[field] !== undefined && value < MINIMUM[field]!)
        problems.push({ field, message: `must be at least ${MINIMUM[field]}` });
    }
  }
  const lr = options["--learning_rate"];
  if (typeof lr === "number" && !(lr > 0 && lr < 1))
    problems.push({ field: "--learning_rate", message: "must be between 0 and 1 (for example 0.0001)" });
  const resolution = options["--validation_resolution"];
  if (has("--validation_resolution") && !/^\d+(x\d+)?(,\d+(x\d+)?)*$/.test(String(resolution)))
    problems.push({ field: "--validation_resolution", message: "must look like 1024x1024 (or a comma-separated list)" });
  const resume = options["--resume_from_checkpoint"];
  if (has("--resume_from_checkpoint") && resume !== "latest" && !/^checkpoint-\d+$/.test(String(resume)))
    problems.push({ field: "--resume_from_checkpoint", message: 'must be "latest" or a checkpoint name like checkpoint-500' });
  const processes = options["--num_processes"];
  if (typeof processes === "number" && processes > 64) problems.push({ field: "--num_processes", message: "must be at most 64" });
  for (const field of ["--output_dir", "--data_backend_config"]) {
    const path = options[field];
    if (has(field) && (String(path).startsWith("/") || String(path).split(/[\\/]/).includes("..")))
      problems.push({ field, message: "must be a relative path without .. (it is resolved inside the job's directory)" });
  }
  if (has("--webhook_config")) problems.push(...checkWebhookConfig(String(options["--webhook_config"])));
  problems.push(...webhookLimitProblems(webhookTargetCount(options["--webhook_config"]), options["--webhook_reporting_interval"]));
  return problems;
}

/**
 * An option map as an environment stores it (JSON: numbers and booleans may also come as text,
 * as a form sends them) checked by the rules of a training form, without what only a whole
 * configuration must hold (required options, one of epochs or steps, the external validation
 * script its method needs). Unknown options pass.
 *
 * @example
 * savedOptionProblems({ "--learning_rate": "fast", "--my_option": 3 }); // [{ field: "--learning_rate", message: 'must be a number, not "fast"' }]
 */
export function savedOptionProblems(config: OptionMap): FieldProblem[] {
  const problems: FieldProblem[] = [];
  const text: Record<string, string> = {};
  const typed: OptionMap = {};
  for (const [field, value] of Object.entries(config)) {
    const kind = CHECKED_TYPES[field];
    if (value === null || kind === undefined) typed[field] = value;
    else if (typeof value === "string") text[field] = value;
    else if (kind === "boolean" ? typeof value !== "boolean" : typeof value !== "number")
      problems.push({
        field,
        message: `must be ${kind === "boolean" ? "true or false" : `a ${kind === "integer" ? "whole number" : "number"}`}, not ${JSON.stringify(value)}`,
      });
    else if (kind === "integer" && !Number.isInteger(value)) problems.push({ field, message: `must be a whole number, not ${value}` });
    else typed[field] = value;
  }
  const fromText = typedOptions(text);
  problems.push(...fromText.problems);
  const options = { ...typed, ...fromText.options };
  if (Number(options["--max_train_steps"] ?? 0) > 0 && Number(options["--num_train_epochs"] ?? 0) > 0)
    problems.push(...BOTH_EPOCHS_AND_STEPS);
  problems.push(...optionValueProblems(options));
  return problems;
}

/** How many entries a --webhook_config value names (0 when it is not a JSON array). */
function webhookTargetCount(value: unknown): number {
  try {
    const parsed: unknown = typeof value === "string" ? JSON.parse(value) : null;
    return Array.isArray(parsed) ? parsed.length : 0;
  } catch {
    return 0;
  }
}

/** `--webhook_config`: a JSON array of webhook objects (each a receiver of the job's lifecycle events). */
export function checkWebhookConfig(text: string): FieldProblem[] {
  const field = "--webhook_config";
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return [{ field, message: "must be a JSON array of webhook objects" }];
  }
  if (!Array.isArray(parsed)) return [{ field, message: "must be a JSON array of webhook objects" }];
  const problems: FieldProblem[] = [];
  parsed.forEach((hook, i) => {
    const h = hook as { webhook_type?: unknown; callback_url?: unknown; webhook_url?: unknown; ssl_no_verify?: unknown };
    if (!h || typeof h !== "object") return problems.push({ field, message: `entry ${i} must be an object` });
    // A discord entry names its address webhook_url, any other callback_url (SimpleTuner's
    // simpletuner/helpers/webhooks/config.py, check_discord_webhook_config and check_raw_webhook_config).
    const address = h.webhook_type === "discord" ? "webhook_url" : "callback_url";
    const url = h[address];
    if (typeof url !== "string" || !/^https?:\/\//.test(url))
      problems.push({ field, message: `entry ${i}: ${address} must be an http(s) URL` });
    if (h.webhook_type !== undefined && typeof h.webhook_type !== "string")
      problems.push({ field, message: `entry ${i}: webhook_type must be a string such as "raw"` });
    if (h.ssl_no_verify !== undefined && typeof h.ssl_no_verify !== "boolean")
      problems.push({ field, message: `entry ${i}: ssl_no_verify must be true or false` });
    return undefined;
  });
  return problems;
}
