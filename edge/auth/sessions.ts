import { and, eq, gt, lt } from "drizzle-orm";
import type { User } from "../../shared/schemas/users";
import type { Database } from "../db/client";
import { sessions, users } from "../db/schema";
import { randomToken, sha256Hex } from "./crypto";
import { credentialUserColumns, toUser } from "./users";

export const SESSION_COOKIE = "st_session";
/** Session lifetimes: 24 hours, or 30 days with remember_me. Fixed from login, not sliding. */
export const SESSION_TTL_MS = 24 * 60 * 60 * 1000;
export const REMEMBERED_SESSION_TTL_MS = 30 * 24 * 60 * 60 * 1000;

/** Starts a session; only the token's hash is stored, so a database leak yields no sessions. */
export async function createSession(db: Database, userId: number, rememberMe: boolean): Promise<{ token: string; expiresAt: Date }> {
  const token = randomToken();
  const now = new Date();
  const expiresAt = new Date(now.getTime() + (rememberMe ? REMEMBERED_SESSION_TTL_MS : SESSION_TTL_MS));
  await db
    .insert(sessions)
    .values({ tokenHash: await sha256Hex(token), userId, createdAt: now.toISOString(), expiresAt: expiresAt.toISOString() });
  // Expired sessions of this user are dropped here rather than by a sweeper.
  await db.delete(sessions).where(and(eq(sessions.userId, userId), lt(sessions.expiresAt, now.toISOString())));
  return { token, expiresAt };
}

/** The user of a live session token, or null. */
export async function findSessionUser(db: Database, token: string): Promise<{ user: User; tokenHash: string } | null> {
  const tokenHash = await sha256Hex(token);
  const [row] = await db
    .select(credentialUserColumns)
    .from(sessions)
    .innerJoin(users, eq(users.id, sessions.userId))
    .where(and(eq(sessions.tokenHash, tokenHash), gt(sessions.expiresAt, new Date().toISOString())));
  return row && !row.disabledAt ? { user: toUser(row, row.levels), tokenHash } : null;
}

export async function deleteSession(db: Database, tokenHash: string): Promise<void> {
  await db.delete(sessions).where(eq(sessions.tokenHash, tokenHash));
}
