import { z } from "@hono/zod-openapi";
import { BooleanQuery, Timestamp } from "./common";

/** Names that would collide with the fixed paths under /api/configs/. */
export const RESERVED_ENVIRONMENT_NAMES = ["examples", "environments"] as const;

// An environment's name becomes a directory on the box, so it can never hold a path separator,
// be "." or "..", or start with a dot or dash.
export const EnvironmentName = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, "1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit")
  .refine((name) => !(RESERVED_ENVIRONMENT_NAMES as readonly string[]).includes(name.toLowerCase()), {
    message: `"examples" and "environments" are reserved; choose another name`,
  })
  .openapi({ example: "portraits-flux" });

export const OptionName = z
  .string()
  .regex(/^--[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/, `option names start with "--", for example "--learning_rate"`)
  .openapi({ example: "--learning_rate" });
export const OptionValue = z
  .union([z.string(), z.number(), z.boolean(), z.null()], { error: "an option value is a string, number, boolean or null" })
  .openapi({ example: 0.0001 });
export const ConfigOptions = z
  .record(OptionName, OptionValue, {
    error: (issue) => (issue.code === "invalid_key" ? `option names start with "--", for example "--learning_rate"` : undefined),
  })
  .openapi("ConfigOptions", {
    description:
      "Training options by name, each prefixed with `--`. Secret-looking values read back as `********`: under a key naming a key, token, secret, password, passphrase, credential, auth, cookie, signature or a webhook's URL, at any depth, also inside JSON such as `--webhook_config`; and the user info (`user:pass@`) and secret-looking query parameters of any URL. Sending back what was shown keeps the stored value. `--trainer_command` may be set only by an admin.",
    example: { "--model_family": "flux", "--learning_rate": 0.0001, "--lora_rank": 16, "--validation_preview": false },
  });
export type ConfigOptions = z.infer<typeof ConfigOptions>;

/** One entry of the dataloader file `multidatabackend.json`, SimpleTuner's dataset list. */
export const DataloaderDataset = z
  .object({
    id: z.string().openapi({ description: "Dataset identifier", example: "portraits-flux-images" }),
    type: z.string().openapi({ example: "local" }),
    dataset_type: z.string().openapi({ description: "`image`, `text_embeds` or `conditioning`", example: "image" }),
    instance_data_dir: z
      .string()
      .optional()
      .openapi({ description: "For image and conditioning datasets", example: "datasets/portraits-flux" }),
    caption_strategy: z.string().optional().openapi({ description: "`textfile` or `filename`", example: "textfile" }),
    resolution: z.number().optional().openapi({ description: "1024 with `pixel_area`, or 1.0 with `area`", example: 1024 }),
    resolution_type: z.string().optional().openapi({ example: "pixel_area" }),
    minimum_image_size: z.number().optional(),
    maximum_image_size: z.number().optional(),
    target_downsample_size: z.number().optional(),
    cache_dir_vae: z.string().optional().openapi({ example: "cache/portraits-flux/vae" }),
    crop: z.boolean().optional(),
    crop_style: z.string().optional().openapi({ example: "random" }),
    crop_aspect: z.string().optional().openapi({ example: "square" }),
    metadata_backend: z.string().optional().openapi({ example: "discovery" }),
    conditioning_data: z
      .array(z.string())
      .optional()
      .openapi({ description: "Ids of conditioning datasets attached to this image dataset" }),
    conditioning_type: z.string().optional().openapi({ description: "`reference_strict` or `reference_loose`" }),
    default: z.boolean().optional().openapi({ description: "Marks the default text_embeds dataset" }),
    cache_dir: z.string().optional().openapi({ description: "Text-embed cache directory", example: "cache/portraits-flux/text" }),
    write_batch_size: z.number().int().optional(),
  })
  // SimpleTuner reads many more dataset options (repeats, crop styles, ...): kept as they are.
  .catchall(z.unknown())
  .openapi("DataloaderDataset");
export type DataloaderDataset = z.infer<typeof DataloaderDataset>;
export const Dataloader = z
  .array(DataloaderDataset)
  .openapi("Dataloader", { description: "The dataloader file: a JSON array of datasets" });

const ModelField = (example: string, description?: string) =>
  z
    .string()
    .min(1)
    .max(100)
    .openapi({ example, ...(description ? { description } : {}) });
const Description = z.string().max(2000);
const Tags = z
  .array(z.string().min(1).max(64))
  .max(50)
  .openapi({ example: ["flux", "portraits"] });

export const EnvironmentCreate = z
  .strictObject({
    name: EnvironmentName,
    model_family: ModelField("flux").optional(),
    model_flavour: ModelField("dev").optional(),
    model_type: ModelField("lora", "For example `full` or `lora`").optional(),
    lora_type: ModelField("lycoris", "For example `standard` or `lycoris`").optional(),
    description: Description.optional().openapi({ example: "Portrait LoRA on FLUX.1 [dev]" }),
    from_example: z.string().max(64).optional().openapi({
      description:
        "Start from a shipped template (GET /api/configs/examples): its options, tags, description and model fields; fields given here win",
      example: "demo",
    }),
  })
  .openapi("EnvironmentCreate", { example: { name: "portraits", model_family: "flux", model_flavour: "dev", model_type: "lora" } });
export type EnvironmentCreate = z.infer<typeof EnvironmentCreate>;

export const EnvironmentUpdate = z
  .strictObject({
    name: EnvironmentName.optional().openapi({ description: "A new name: renames the environment" }),
    description: Description.nullable().optional(),
    tags: Tags.optional().openapi({ description: "Replaces the tags" }),
    config: ConfigOptions.optional().openapi({
      description: "Replaces the whole option map (it is not merged): send every option to keep",
    }),
    dataloader: z.array(DataloaderDataset).max(64).optional().openapi({
      description:
        "Replaces the whole dataloader (multidatabackend.json). Ids are unique; `instance_data_dir` is an uploaded dataset, `datasets/<path>` (an absolute path on the box only from an admin); `cache_dir_vae` and `cache_dir` are paths inside the job's directory. Other SimpleTuner dataset options are kept as they are",
    }),
  })
  .openapi("EnvironmentUpdate", {
    example: { tags: ["flux"], config: { "--model_family": "flux", "--model_type": "lora", "--learning_rate": 0.0001 } },
  });
export type EnvironmentUpdate = z.infer<typeof EnvironmentUpdate>;

const definition = {
  name: z.string().openapi({ example: "portraits-flux" }),
  description: z.string().nullable(),
  tags: z.array(z.string()),
  model_family: z.string().nullable().openapi({ example: "flux" }),
  model_flavour: z.string().nullable().openapi({ example: "dev" }),
  model_type: z.string().nullable().openapi({ example: "lora" }),
  lora_type: z.string().nullable(),
  config: ConfigOptions,
  dataloader: Dataloader,
};

export const Environment = z
  .object({
    ...definition,
    active: z.boolean().openapi({ description: "True when this is the caller's active environment (each user has at most one)" }),
    owner: z.string().nullable().openapi({
      description: "Username of its owner (who created it); only the owner, a lead or an admin may change, activate or delete it",
      example: "ada",
    }),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .openapi("Environment");
export type Environment = z.infer<typeof Environment>;

export const ExampleEnvironment = z.object(definition).openapi("ExampleEnvironment");
export type ExampleEnvironment = z.infer<typeof ExampleEnvironment>;
export const ExampleList = z.object({ examples: z.array(ExampleEnvironment) }).openapi("ExampleList");

export const EnvironmentExport = z
  .object({ ...definition, exported_at: Timestamp })
  .openapi("EnvironmentExport", { description: "An environment as a portable file: no id, owner or active flag" });
export type EnvironmentExport = z.infer<typeof EnvironmentExport>;

export const EnvironmentSummary = z
  .object({
    name: z.string(),
    description: z.string().nullable(),
    tags: z.array(z.string()),
    model_family: z.string().nullable(),
    model_type: z.string().nullable(),
    active: z.boolean(),
    owner: z.string().nullable(),
    created_at: Timestamp,
    updated_at: Timestamp,
    last_run: z
      .object({
        job_id: z.string(),
        status: z.string(),
        queued_at: z.string(),
        started_at: z.string().nullable(),
        completed_at: z.string().nullable(),
      })
      .nullable()
      .openapi({ description: "The newest job submitted with this environment's name (null: none yet)" }),
  })
  .openapi("EnvironmentSummary");
export type EnvironmentSummary = z.infer<typeof EnvironmentSummary>;
export const EnvironmentList = z.object({ environments: z.array(EnvironmentSummary) }).openapi("EnvironmentList");

export const ConfigListQuery = z.object({
  config_type: z.enum(["model"]).default("model").openapi({ description: "The kind of configuration; only `model` exists" }),
});

/** How GET /api/configs/{name} and its export show secrets. */
export const EnvironmentReadQuery = z.object({
  unmasked: BooleanQuery.optional().openapi({
    description:
      "`true`: secret-looking values as stored, not `********` (the environment's owner, leads and admins only; anyone else gets 403 `not_owner`). Default false",
  }),
});

export const EnvironmentParams = z.object({ name: EnvironmentName.openapi({ param: { name: "name", in: "path" } }) });

export const EnvironmentActivated = z
  .object({ success: z.literal(true), active: z.string().openapi({ description: "The name of the environment now active" }) })
  .openapi("EnvironmentActivated");

export const EnvironmentDeleted = z
  .object({ success: z.literal(true), deleted: z.string().openapi({ description: "The name of the environment deleted" }) })
  .openapi("EnvironmentDeleted");

export const DataloaderRegenerated = z.object({ success: z.literal(true), dataloader: Dataloader }).openapi("DataloaderRegenerated");
