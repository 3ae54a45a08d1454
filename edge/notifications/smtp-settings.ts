import type { Database } from "../db/client";
import { ApiError } from "../errors";
import { getSetting, setSetting, type SmtpConfig } from "../settings-store";
import { refusedHost } from "../webhooks/targets";
import type { SmtpSettingsUpdate } from "../../shared/schemas/notifications";
import { sendEmail } from "./deliveries";
import { renderMessage } from "./message";

/*
 * The admin's SMTP settings for e-mail notifications: host, port, TLS mode, user, password
 * (never shown back: masked), from. The host obeys the outbound guard of the webhooks: a local
 * name or a loopback or private address is refused unless private targets are allowed.
 */

const MASK = "********";

/** The settings as the API shows them: the password masked. */
export const maskedSmtp = (config: SmtpConfig) => ({ ...config, password: config.password ? MASK : "" });

/** The stored settings, masked. */
export async function readSmtp(db: Database) {
  return maskedSmtp(await getSetting(db, "smtp"));
}

/**
 * Saves the SMTP settings; a password left out (or sent back masked) keeps the stored one.
 *
 * @example
 * await saveSmtp(db, { host: "smtp.example.com", port: 587, tls: "starttls", username: "u", password: "p", from: "jobs@example.com" });
 */
export async function saveSmtp(db: Database, update: SmtpSettingsUpdate) {
  const [before, { allow_private_targets }] = await Promise.all([getSetting(db, "smtp"), getSetting(db, "webhooks")]);
  const host = update.host.trim();
  const refused = host && !allow_private_targets ? refusedHost(host) : null;
  if (refused)
    throw new ApiError(422, "notification_target_refused", `Refused: body.host: ${refused}`, [{ path: "body.host", message: refused }]);
  const next: SmtpConfig = {
    host,
    port: update.port,
    tls: update.tls,
    username: update.username,
    password: update.password === undefined || update.password === MASK ? before.password : update.password,
    from: update.from,
  };
  await setSetting(db, "smtp", next);
  return maskedSmtp(next);
}

/** Sends a test message to `to` now, through the stored settings; recorded nowhere. */
export async function testSmtp(db: Database, to: string): Promise<{ sent: boolean; error: string | null }> {
  const [config, { allow_private_targets }] = await Promise.all([getSetting(db, "smtp"), getSetting(db, "webhooks")]);
  const message = renderMessage("job.completed", { job_name: "SMTP test", status: "this is a test message" }, new Date());
  const result = await sendEmail(
    config,
    { to, subject: "[training] SMTP test", text: message.text, html: message.html },
    allow_private_targets,
  );
  return result.ok ? { sent: true, error: null } : { sent: false, error: result.error };
}
