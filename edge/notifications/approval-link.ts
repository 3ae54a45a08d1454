import { base64url, constantTimeEqual, randomToken } from "../auth/crypto";
import type { Database } from "../db/client";
import { getSetting } from "../settings-store";

/*
 * The approval links sent to admins with approval.needed: `<id>.<signature>`, where the id names a
 * stored link (one job, one admin, an expiry, used or not) and the signature is HMAC-SHA256 over
 * the id, the job, the admin and the expiry with the service's approval_link_secret. A link
 * decides its own job once, as its admin; a changed id or signature, an expired or a used link
 * is refused.
 */

/** How long an approval link works. */
export const APPROVAL_LINK_HOURS = 24;

export interface ApprovalLink {
  id: string;
  jobId: string;
  adminId: number;
  expiresAt: string;
}

/** Why a link cannot be used, for the page that says so. */
export type LinkRefusal = "invalid" | "expired" | "used";

async function linkSecret(db: Database): Promise<string> {
  const existing = await getSetting(db, "approval_link_secret");
  if (existing) return existing;
  await db.$client.execute({
    sql: "INSERT INTO settings (key, value, updated_at) VALUES ('approval_link_secret', ?, ?) ON CONFLICT (key) DO NOTHING",
    args: [JSON.stringify(randomToken(32)), new Date().toISOString()],
  });
  return getSetting(db, "approval_link_secret");
}

async function sign(secret: string, link: ApprovalLink): Promise<string> {
  const key = await crypto.subtle.importKey("raw", new TextEncoder().encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const payload = `${link.id}.${link.jobId}.${link.adminId}.${link.expiresAt}`;
  return base64url(new Uint8Array(await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(payload))));
}

/**
 * Makes a link for one admin to decide one job; returns its token.
 *
 * @example
 * const token = await createApprovalLink(db, "local-1a2b", 1); // "Qm9...X.c2ln..."
 */
export async function createApprovalLink(db: Database, jobId: string, adminId: number, now = new Date()): Promise<string> {
  const link: ApprovalLink = {
    id: randomToken(18),
    jobId,
    adminId,
    expiresAt: new Date(now.getTime() + APPROVAL_LINK_HOURS * 3600_000).toISOString(),
  };
  await db.$client.execute({
    sql: "INSERT INTO approval_links (id, job_id, admin_id, expires_at) VALUES (?, ?, ?, ?)",
    args: [link.id, link.jobId, link.adminId, link.expiresAt],
  });
  return `${link.id}.${await sign(await linkSecret(db), link)}`;
}

/** The link a token names if its signature holds and it is unused and unexpired; else why not. */
export async function checkApprovalLink(db: Database, token: string, now = new Date()): Promise<ApprovalLink | LinkRefusal> {
  const [id, signature, extra] = token.split(".");
  if (!id || !signature || extra !== undefined) return "invalid";
  const { rows } = await db.$client.execute({
    sql: "SELECT id, job_id, admin_id, expires_at, used_at FROM approval_links WHERE id = ?",
    args: [id],
  });
  const row = rows[0];
  if (!row) return "invalid";
  const link: ApprovalLink = {
    id: String(row.id),
    jobId: String(row.job_id),
    adminId: Number(row.admin_id),
    expiresAt: String(row.expires_at),
  };
  if (!constantTimeEqual(signature, await sign(await linkSecret(db), link))) return "invalid";
  if (row.used_at !== null) return "used";
  if (Date.parse(link.expiresAt) <= now.getTime()) return "expired";
  return link;
}

/** Marks the link used, only if it was not (two clicks at once: one wins). True when this call used it. */
export async function useApprovalLink(db: Database, link: ApprovalLink, now = new Date()): Promise<boolean> {
  const { rowsAffected } = await db.$client.execute({
    sql: "UPDATE approval_links SET used_at = ? WHERE id = ? AND used_at IS NULL AND expires_at > ?",
    args: [now.toISOString(), link.id, now.toISOString()],
  });
  return rowsAffected === 1;
}
