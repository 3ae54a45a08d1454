import { z } from "@hono/zod-openapi";

/** How an option's value is written: a form control per type. `json`: a JSON document held as text. */
export const OptionType = z.enum(["string", "integer", "number", "boolean", "choice", "json"]);
export type OptionType = z.infer<typeof OptionType>;

export const CatalogueOption = z
  .object({
    name: z.string().openapi({ example: "--learning_rate" }),
    type: OptionType,
    default: z.union([z.string(), z.number(), z.boolean(), z.null()]).openapi({
      description:
        "What training uses when the option is left out: the service's default where it fills one in, else SimpleTuner's; null: none",
    }),
    allowed: z.array(z.string()).optional().openapi({ description: "For `choice`: the values offered" }),
    minimum: z.number().optional(),
    maximum: z.number().optional(),
    help: z.string(),
    required: z.boolean().openapi({ description: "Required on a training form (POST /api/training/validate and /start)" }),
    admin_only: z.boolean().openapi({ description: "Only an admin may set it (else 422 `admin_only_option`)" }),
    secret: z.boolean().openapi({ description: "Secret-looking: answers show its value as `********`" }),
  })
  .openapi("CatalogueOption");
export type CatalogueOption = z.infer<typeof CatalogueOption>;

export const OptionCatalogue = z.object({ options: z.array(CatalogueOption) }).openapi("OptionCatalogue", {
  description: "The training options the service knows; any other `--` option is allowed and passed on as it is",
});
export type OptionCatalogue = z.infer<typeof OptionCatalogue>;
