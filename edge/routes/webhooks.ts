import { createRoute, z } from "@hono/zod-openapi";
import { createRouter } from "../router";
import { getSetting, setSetting } from "../settings-store";
import { signingSecret } from "../webhooks/delivery";
import { error, json } from "./openapi";

/** Outbound webhooks: the admin's settings (the SSRF guard and the signing secret). */
export const webhooksRoutes = createRouter();

const tags = ["Webhooks"];
const WebhookSettings = z
  .object({
    allow_private_targets: z
      .boolean()
      .openapi({ description: "Let webhooks go to loopback and private addresses (off by default: SSRF guard)" }),
    signing_secret: z.string().openapi({
      description:
        "The Standard Webhooks secret (whsec_...) receivers verify webhook-signature with, unless a --webhook_config entry has its own signing_secret",
    }),
  })
  .openapi("WebhookSettings");
const WebhookSettingsUpdate = z.strictObject({ allow_private_targets: z.boolean() }).openapi("WebhookSettingsUpdate");

webhooksRoutes.openapi(
  createRoute({
    method: "get",
    path: "/api/admin/webhooks",
    tags,
    summary: "Outbound webhook settings and signing secret (admin)",
    description:
      "Whether webhooks may go to private targets, and the service's Standard Webhooks signing secret (`whsec_...`) that receivers verify `webhook-signature` with.",
    responses: { 200: json(WebhookSettings, "Settings"), 401: error("No valid credential"), 403: error("Not an admin") },
  }),
  async (c) => {
    const db = c.get("db");
    const [settings, secret] = await Promise.all([getSetting(db, "webhooks"), signingSecret(db)]);
    return c.json({ allow_private_targets: settings.allow_private_targets, signing_secret: secret }, 200);
  },
);

webhooksRoutes.openapi(
  createRoute({
    method: "put",
    path: "/api/admin/webhooks",
    tags,
    summary: "Change the outbound webhook settings (admin)",
    description:
      "`allow_private_targets: true` lets job webhooks reach loopback, private and link-local addresses and local names (off by default: the SSRF guard).",
    request: { body: { required: true, content: { "application/json": { schema: WebhookSettingsUpdate } } } },
    responses: {
      200: json(WebhookSettings, "Saved"),
      401: error("No valid credential"),
      403: error("Not an admin"),
      422: error("Invalid body"),
    },
  }),
  async (c) => {
    const db = c.get("db");
    const body = c.req.valid("json");
    await setSetting(db, "webhooks", { allow_private_targets: body.allow_private_targets });
    c.get("log").info("webhook settings changed", { allow_private_targets: body.allow_private_targets });
    return c.json({ allow_private_targets: body.allow_private_targets, signing_secret: await signingSecret(db) }, 200);
  },
);
