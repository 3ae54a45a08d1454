import type { InStatement } from "@libsql/client/web";
import type { Database } from "../db/client";

/*
 * Idempotency keys of the submit routes (edge/middleware/idempotency.ts): per user, the request a
 * key first came with and, once answered, the answer. Claiming a key is one conditional INSERT,
 * so of two requests with one key at once exactly one goes on to queue a job.
 */

/** How long a key is remembered: its first answer is replayed for 24 h. */
export const IDEMPOTENCY_KEY_TTL_MS = 24 * 60 * 60 * 1000;

/** What a key holds when it was not claimed: the first request's hash and, once answered, its answer. */
export interface HeldKey {
  route: string;
  requestHash: string;
  answer: { status: number; body: string } | null;
}

/**
 * Claims `key` for this request, or answers what it already holds. A key older than 24 h counts
 * as new: its row is taken over.
 *
 * @example
 * const held = await claimKey(db, 7, "abc", "POST /api/queue/submit", hash, new Date());
 * if (held === null) { ... handle the request, then answerKey ... }
 */
export async function claimKey(
  db: Database,
  userId: number,
  key: string,
  route: string,
  requestHash: string,
  now: Date,
): Promise<HeldKey | null> {
  const expired = new Date(now.getTime() - IDEMPOTENCY_KEY_TTL_MS).toISOString();
  // One statement, atomic on its own: a new key (every submission of a client like the CLI) costs
  // one round trip; only a key already held is read, in a second.
  const claim = await db.$client.execute({
    sql: `INSERT INTO idempotency_keys (user_id, key, route, request_hash, created_at) VALUES (?1, ?2, ?3, ?4, ?5)
          ON CONFLICT (user_id, key) DO UPDATE SET route = ?3, request_hash = ?4, status = NULL, body = NULL, created_at = ?5
          WHERE idempotency_keys.created_at <= ?6
          RETURNING 1`,
    args: [userId, key, route, requestHash, now.toISOString(), expired],
  });
  if (claim.rows.length) return null;
  const held = await db.$client.execute({
    sql: "SELECT route, request_hash, status, body FROM idempotency_keys WHERE user_id = ? AND key = ?",
    args: [userId, key],
  });
  const row = held.rows[0];
  // Held a moment ago and gone now: its request failed (releaseKey) meanwhile; this one may try again.
  if (row === undefined) return claimKey(db, userId, key, route, requestHash, now);
  return {
    route: String(row.route),
    requestHash: String(row.request_hash),
    answer: row.status === null ? null : { status: Number(row.status), body: String(row.body ?? "") },
  };
}

/** Stores the answer of a claimed key's request, to be replayed. */
export async function answerKey(db: Database, userId: number, key: string, answer: { status: number; body: string }): Promise<void> {
  await db.$client.execute(answerKeyStatement(userId, key, answer));
}

/**
 * answerKey's statement, for a batch that stores the answer with what the request did: the
 * Scheduler writes a submission's answer in the batch that stores its job.
 *
 * @example
 * statements.push(answerKeyStatement(7, "abc", { status: 200, body: JSON.stringify(answer) }));
 */
export function answerKeyStatement(userId: number, key: string, answer: { status: number; body: string }): InStatement {
  return {
    sql: "UPDATE idempotency_keys SET status = ?, body = ? WHERE user_id = ? AND key = ?",
    args: [answer.status, answer.body, userId, key],
  };
}

/** Lets a key go unanswered (its request failed with a 5xx): the client may send it again. */
export async function releaseKey(db: Database, userId: number, key: string): Promise<void> {
  await db.$client.execute({ sql: "DELETE FROM idempotency_keys WHERE user_id = ? AND key = ? AND status IS NULL", args: [userId, key] });
}

/**
 * Forgets keys older than 24 h (the Scheduler's housekeeping); a late one is also taken over by
 * claimKey, so the sweep only keeps the table small.
 *
 * @example
 * await forgetOldKeys(db, new Date());
 */
export async function forgetOldKeys(db: Database, now: Date = new Date()): Promise<number> {
  const result = await db.$client.execute({
    sql: "DELETE FROM idempotency_keys WHERE created_at <= ?",
    args: [new Date(now.getTime() - IDEMPOTENCY_KEY_TTL_MS).toISOString()],
  });
  return result.rowsAffected;
}
