import { z } from "@hono/zod-openapi";

import { NOTIFICATION_CHANNELS, NOTIFICATION_KINDS, SMTP_TLS_MODES } from "../notification-kinds";

export {
  ADMIN_NOTIFICATION_KINDS,
  NOTIFICATION_CHANNELS,
  NOTIFICATION_KINDS,
  SMTP_TLS_MODES,
  type NotificationChannel,
  type NotificationKind,
} from "../notification-kinds";

const Url = z.string().max(2048).openapi({ example: "https://hooks.example.com/training" });

export const NotificationChannels = z
  .strictObject({
    webhook: z
      .strictObject({ url: Url })
      .nullable()
      .openapi({ description: "A Standard Webhooks receiver, signed with your own secret (`webhook_secret`)" }),
    slack: z.strictObject({ url: Url }).nullable().openapi({ description: "A Slack-compatible incoming webhook: POST `{text, blocks}`" }),
    email: z
      .strictObject({ address: z.email().max(254) })
      .nullable()
      .openapi({ description: "E-mail over the admin's SMTP settings" }),
  })
  .openapi("NotificationChannels");

export const NotificationPreferencesUpdate = z
  .strictObject({
    kinds: z
      .array(z.enum(NOTIFICATION_KINDS))
      .max(NOTIFICATION_KINDS.length)
      .openapi({ description: "The kinds you want; the others are not sent to you" }),
    channels: NotificationChannels,
  })
  .openapi("NotificationPreferencesUpdate");
export type NotificationPreferencesUpdate = z.infer<typeof NotificationPreferencesUpdate>;

export const NotificationPreferences = NotificationPreferencesUpdate.extend({
  webhook_secret: z
    .string()
    .openapi({ description: "Your webhook's Standard Webhooks secret (whsec_...): verify webhook-signature with it" }),
  updated_at: z.string().nullable(),
}).openapi("NotificationPreferences");
export type NotificationPreferences = z.infer<typeof NotificationPreferences>;

export const NotificationDelivery = z
  .object({
    id: z.number().int(),
    kind: z.string(),
    subject: z.string(),
    channel: z.enum(NOTIFICATION_CHANNELS),
    target: z.string().openapi({ description: "The URL or address it went to" }),
    status: z.enum(["pending", "delivered", "failed", "refused"]),
    attempts: z.number().int(),
    last_error: z.string().nullable(),
    event_at: z.string().openapi({ description: "When the transition happened" }),
    created_at: z.string(),
    next_attempt_at: z.string().nullable().openapi({ description: "When a pending delivery is tried next" }),
    delivered_at: z.string().nullable(),
  })
  .openapi("NotificationDelivery");
export type NotificationDelivery = z.infer<typeof NotificationDelivery>;

export const NotificationDeliveryList = z.object({ deliveries: z.array(NotificationDelivery) }).openapi("NotificationDeliveryList");

export const DeliveriesQuery = z.object({
  limit: z.coerce.number().int().min(1).max(200).default(50),
  kind: z.enum(NOTIFICATION_KINDS).optional(),
});

export const SmtpSettingsUpdate = z
  .strictObject({
    host: z.string().max(253),
    port: z.number().int().min(1).max(65535),
    tls: z.enum(SMTP_TLS_MODES).openapi({
      description: "`tls`: TLS from the first byte (port 465); `starttls`: STARTTLS after EHLO (587); `none`: plain (a local relay)",
    }),
    username: z.string().max(256),
    password: z.string().max(1024).optional().openapi({ description: "Left out: the stored one is kept" }),
    from: z.email().max(254),
  })
  .openapi("SmtpSettingsUpdate");
export type SmtpSettingsUpdate = z.infer<typeof SmtpSettingsUpdate>;

export const SmtpSettings = z
  .object({
    host: z.string(),
    port: z.number().int(),
    tls: z.enum(SMTP_TLS_MODES),
    username: z.string(),
    password: z.string().openapi({ description: "Masked: `********` when set, empty when not" }),
    from: z.string(),
  })
  .openapi("SmtpSettings");
export type SmtpSettings = z.infer<typeof SmtpSettings>;

export const SmtpTest = z.strictObject({ to: z.email().max(254) }).openapi("SmtpTest");
export const SmtpTestAnswer = z.object({ sent: z.boolean(), error: z.string().nullable() }).openapi("SmtpTestAnswer");

export const ApprovalLinkParam = z.object({
  token: z
    .string()
    .max(200)
    .openapi({ param: { name: "token", in: "path" }, description: "The link's token, as the message carried it" }),
});

export const ApprovalLinkDecision = z
  .object({
    decision: z.enum(["approve", "reject"]),
    reason: z.string().trim().min(1).max(500).optional().openapi({ description: "Why it is rejected (needed to reject)" }),
  })
  .openapi("ApprovalLinkDecision");
