// The notification kinds, channels and SMTP modes as plain constants, without zod: the dashboard
// (edge/ui/views/notifications.tsx) draws its checkboxes from them, the CLI checks nothing with
// them (the API does), and shared/schemas/notifications.ts builds its enums from them (and
// re-exports them).

/** Every notification kind, in the order the API documents them. */
export const NOTIFICATION_KINDS = [
  "job.started",
  "job.stalled",
  "job.completed",
  "job.failed",
  "approval.needed",
  "approval.decided",
  "budget.warning",
  "budget.exceeded",
  "gpu.quarantined",
] as const;
export type NotificationKind = (typeof NOTIFICATION_KINDS)[number];

/** The kinds that go to every admin rather than to the subject's user (a job's owner): nobody else ever gets them. */
export const ADMIN_NOTIFICATION_KINDS: readonly NotificationKind[] = ["approval.needed", "gpu.quarantined"];

export const NOTIFICATION_CHANNELS = ["webhook", "slack", "email"] as const;
export type NotificationChannel = (typeof NOTIFICATION_CHANNELS)[number];

/** How the SMTP client secures its connection (SmtpSettings.tls). */
export const SMTP_TLS_MODES = ["none", "starttls", "tls"] as const;
export type SmtpTlsMode = (typeof SMTP_TLS_MODES)[number];
