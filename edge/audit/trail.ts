import type { Context } from "hono";
import type { AppEnv } from "../app-env";
import type { Database } from "../db/client";
import { isUniqueViolation } from "../db/errors";
import { sha256Hex } from "../auth/crypto";

/**
 * The audit trail: an append-only, hash-chained table (migration v9). Each entry's hash covers
 * its own fields and the previous entry's hash, so editing, removing or reordering any entry but
 * the newest is detected by `verifyAuditChain`. Details never carry secrets (no passwords, keys
 * or tokens): callers pass names, ids and addresses only.
 */

export const AUDIT_EVENT_TYPES = [
  "login_succeeded",
  "login_failed",
  "logout",
  "user_created",
  "first_admin_created",
  "api_key_created",
  "api_key_revoked",
  "worker_removed",
  "worker_token_rotated",
  "gpu_quarantined",
  "gpu_cleared",
  "job_approved",
  "job_rejected",
  "job_cancelled",
  "job_retried",
  "priority_overridden",
  "limits_changed",
  "approval_rules_changed",
  "provider_settings_changed",
  "cloud_settings_changed",
  "cloud_rates_changed",
  "cloud_job_submitted",
  "metrics_config_changed",
  "storage_quota_changed",
  "event_limits_changed",
  "stall_detection_changed",
  "stall_policy_changed",
  "dataset_quota_changed",
  "dataset_cloud_sharing_changed",
  "gpu_prices_changed",
  "budgets_changed",
  "budget_warning",
  "budget_exceeded",
  "webhook_rejected",
  "rate_limited",
  "smtp_settings_changed",
] as const;
export type AuditEventType = (typeof AUDIT_EVENT_TYPES)[number];

export interface AuditInput {
  event_type: AuditEventType;
  /** The user who acted (null: anonymous, e.g. a failed login or a provider). */
  actor_user_id?: number | null;
  /** Their username, or what an anonymous caller claimed to be (a failed login's username). */
  actor?: string | null;
  client_ip?: string | null;
  user_agent?: string | null;
  /** What was acted on: a job id, key id, user, provider, endpoint. */
  target?: string | null;
  details?: Record<string, unknown>;
}

export interface AuditEntry {
  id: number;
  occurred_at: string;
  event_type: string;
  actor_user_id: number | null;
  actor: string | null;
  client_ip: string | null;
  user_agent: string | null;
  target: string | null;
  details: Record<string, unknown>;
  prev_hash: string;
  hash: string;
}

/** The chain starts from this "previous hash". */
export const GENESIS_HASH = "0".repeat(64);
/*
 * Writers that meet on the same tail retry with a random pause that grows with each try, so a
 * burst of them spreads out instead of colliding again in lockstep. Twenty tries without a pause
 * lost entries when 25 failed logins came at once on 2 cores (the 21st writer in line gave up).
 */
const MAX_ATTEMPTS = 100;
const pause = (attempt: number) => new Promise((resolve) => setTimeout(resolve, Math.random() * Math.min(50, 2 * attempt)));
const USER_AGENT_MAX = 256;

type Row = Record<string, unknown>;

/** The hash of one entry: SHA-256 over a fixed-order JSON array of every stored field. */
export async function entryHash(entry: Omit<AuditEntry, "hash" | "details"> & { details: string }): Promise<string> {
  return sha256Hex(
    JSON.stringify([
      entry.id,
      entry.occurred_at,
      entry.event_type,
      entry.actor_user_id,
      entry.actor,
      entry.client_ip,
      entry.user_agent,
      entry.target,
      entry.details,
      entry.prev_hash,
    ]),
  );
}

/**
 * Appends one entry at the end of the chain. The id is the tail's id + 1, written explicitly:
 * a concurrent writer that took the same id makes this insert fail on the primary key, and it
 * retries on the new tail. Returns the stored entry.
 */
export async function recordAudit(db: Database, input: AuditInput): Promise<AuditEntry> {
  const details = JSON.stringify(input.details ?? {});
  for (let attempt = 1; ; attempt++) {
    const tail = (await db.$client.execute("SELECT id, hash FROM audit_log ORDER BY id DESC LIMIT 1")).rows[0] as Row | undefined;
    const base = {
      id: tail ? Number(tail.id) + 1 : 1,
      occurred_at: new Date().toISOString(),
      event_type: input.event_type,
      actor_user_id: input.actor_user_id ?? null,
      actor: input.actor ?? null,
      client_ip: input.client_ip ?? null,
      user_agent: input.user_agent ? input.user_agent.slice(0, USER_AGENT_MAX) : null,
      target: input.target ?? null,
      details,
      prev_hash: tail ? String(tail.hash) : GENESIS_HASH,
    };
    const hash = await entryHash(base);
    try {
      await db.$client.execute({
        sql: "INSERT INTO audit_log (id, occurred_at, event_type, actor_user_id, actor, client_ip, user_agent, target, details, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        args: [
          base.id,
          base.occurred_at,
          base.event_type,
          base.actor_user_id,
          base.actor,
          base.client_ip,
          base.user_agent,
          base.target,
          base.details,
          base.prev_hash,
          hash,
        ],
      });
      return { ...base, details: input.details ?? {}, hash };
    } catch (error) {
      if (!isUniqueViolation(error) || attempt >= MAX_ATTEMPTS) throw error;
      await pause(attempt);
    }
  }
}

/**
 * Records an entry after the response (ctx.waitUntil), filled with the request's caller, client
 * address and User-Agent; a failure is logged, never raised into the request.
 */
export function auditLater(c: Context<AppEnv>, input: AuditInput): void {
  const principal = c.get("principal");
  const entry: AuditInput = {
    actor_user_id: principal?.user.id ?? null,
    actor: principal?.user.username ?? null,
    client_ip: c.get("clientIp") ?? null,
    user_agent: c.req.header("user-agent") ?? null,
    ...input,
  };
  const log = c.get("log");
  c.executionCtx.waitUntil(
    recordAudit(c.get("db"), entry).catch((error: unknown) =>
      log.error("could not write an audit entry", { event_type: input.event_type, error: String(error) }),
    ),
  );
}

// Only a tampered row holds details that are not JSON: shown as they are (verify reports the row).
function parseDetails(text: string): Record<string, unknown> {
  try {
    return JSON.parse(text) as Record<string, unknown>;
  } catch {
    return { unparseable: text };
  }
}

function toEntry(row: Row): AuditEntry {
  return {
    id: Number(row.id),
    occurred_at: String(row.occurred_at),
    event_type: String(row.event_type),
    actor_user_id: row.actor_user_id === null ? null : Number(row.actor_user_id),
    actor: (row.actor as string | null) ?? null,
    client_ip: (row.client_ip as string | null) ?? null,
    user_agent: (row.user_agent as string | null) ?? null,
    target: (row.target as string | null) ?? null,
    details: parseDetails(String(row.details ?? "{}")),
    prev_hash: String(row.prev_hash),
    hash: String(row.hash),
  };
}

export interface AuditQuery {
  event_type?: string;
  /** ISO 8601: entries at or after / before. */
  since?: string;
  until?: string;
  /** Entries with an id below this (paging back through older entries). */
  before_id?: number;
  limit: number;
}

/**
 * One page, newest first, filtered: at most `limit` entries with ids below `before_id`, and
 * whether older ones match too (`more`: the next page starts below the last id of this one).
 */
export async function listAudit(db: Database, query: AuditQuery): Promise<{ entries: AuditEntry[]; more: boolean }> {
  const where: string[] = [];
  const args: (string | number)[] = [];
  if (query.event_type) (where.push("event_type = ?"), args.push(query.event_type));
  if (query.since) (where.push("occurred_at >= ?"), args.push(query.since));
  if (query.until) (where.push("occurred_at < ?"), args.push(query.until));
  if (query.before_id !== undefined) (where.push("id < ?"), args.push(query.before_id));
  const sql = `SELECT * FROM audit_log ${where.length ? `WHERE ${where.join(" AND ")}` : ""} ORDER BY id DESC LIMIT ?`;
  const result = await db.$client.execute({ sql, args: [...args, query.limit + 1] });
  const rows = result.rows as unknown as Row[];
  return { entries: rows.slice(0, query.limit).map(toEntry), more: rows.length > query.limit };
}

export interface ChainReport {
  valid: boolean;
  entries_checked: number;
  /** The first entry that does not verify, and why. */
  first_invalid: { id: number; reason: string } | null;
  last_hash: string | null;
}

const VERIFY_PAGE = 1000;

/** Walks the whole chain from the start and recomputes every hash. */
export async function verifyAuditChain(db: Database): Promise<ChainReport> {
  let prevHash = GENESIS_HASH;
  let expectedId = 1;
  let checked = 0;
  for (;;) {
    const page = await db.$client.execute({
      sql: "SELECT * FROM audit_log WHERE id >= ? ORDER BY id LIMIT ?",
      args: [expectedId, VERIFY_PAGE],
    });
    const rows = page.rows as unknown as Row[];
    for (const row of rows) {
      const id = Number(row.id);
      const fail = (reason: string): ChainReport => ({
        valid: false,
        entries_checked: checked,
        first_invalid: { id, reason },
        last_hash: prevHash === GENESIS_HASH ? null : prevHash,
      });
      if (id !== expectedId) return fail(`entry ${expectedId}${id - expectedId > 1 ? ` to ${id - 1}` : ""} is missing`);
      if (String(row.prev_hash) !== prevHash) return fail("prev_hash does not match the previous entry's hash");
      const { hash: _hash, details: _details, ...fields } = toEntry(row);
      const recomputed = await entryHash({ ...fields, details: String(row.details) });
      if (recomputed !== String(row.hash)) return fail("the entry's contents do not match its hash (edited)");
      prevHash = String(row.hash);
      expectedId = id + 1;
      checked++;
    }
    if (rows.length < VERIFY_PAGE) break;
  }
  return { valid: true, entries_checked: checked, first_invalid: null, last_hash: checked ? prevHash : null };
}

/** Total entries and those of the last 24 hours (metrics, category "audit"). */
export async function auditCounts(db: Database): Promise<{ total: number; last24h: number }> {
  const since = new Date(Date.now() - 86_400_000).toISOString();
  const result = await db.$client.execute({
    sql: "SELECT (SELECT count(*) FROM audit_log) AS total, (SELECT count(*) FROM audit_log WHERE occurred_at >= ?) AS recent",
    args: [since],
  });
  const row = result.rows[0] as Row;
  return { total: Number(row.total), last24h: Number(row.recent) };
}

/** `{ field: { from, to } }` for every top-level field whose value differs (settings changes). */
export function changedFields(before: object, after: object): Record<string, { from: unknown; to: unknown }> {
  const changed: Record<string, { from: unknown; to: unknown }> = {};
  const a = before as Record<string, unknown>;
  const b = after as Record<string, unknown>;
  for (const key of new Set([...Object.keys(a), ...Object.keys(b)])) {
    if (JSON.stringify(a[key]) !== JSON.stringify(b[key])) changed[key] = { from: a[key] ?? null, to: b[key] ?? null };
  }
  return changed;
}
