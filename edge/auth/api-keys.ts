import { and, desc, eq, isNull, lt, or, sql } from "drizzle-orm";
import type { ApiKey } from "../../shared/schemas/auth";
import type { User } from "../../shared/schemas/users";
import type { Database } from "../db/client";
import { compileSelect, queryBuilder } from "../db/compiled";
import { isUniqueViolation } from "../db/errors";
import { apiKeys, users } from "../db/schema";
import { notFound } from "../errors";
import { constantTimeEqual, randomToken, sha256Hex } from "./crypto";
import { credentialUserColumns, toUser } from "./users";
import { BoundedMap } from "../../shared/remembered";

/*
 * Keys are `st_` + 43 random URL-safe characters (256 bits). The first 11 characters are stored
 * as an indexed prefix to find the row; the whole key only as SHA-256. A salted slow hash would
 * add nothing here: the key is random, not a human secret, and hashing runs on every request.
 */
export const API_KEY_PREFIX = "st_";
const PREFIX_LENGTH = 11;
/** last_used_at is written at most this often per key, so reads do not become writes. */
const LAST_USED_RESOLUTION_MS = 60_000;

const publicColumns = {
  id: apiKeys.id,
  name: apiKeys.name,
  prefix: apiKeys.prefix,
  created_at: apiKeys.createdAt,
  expires_at: apiKeys.expiresAt,
  last_used_at: apiKeys.lastUsedAt,
  revoked_at: apiKeys.revokedAt,
};

/** Creates a key for a user; the returned `key` is the only time the secret is ever visible. */
export async function createApiKey(db: Database, userId: number, name: string, expiresInDays?: number): Promise<ApiKey & { key: string }> {
  const now = new Date();
  const expiresAt = expiresInDays ? new Date(now.getTime() + expiresInDays * 86_400_000).toISOString() : null;
  for (let attempt = 0; ; attempt++) {
    const key = API_KEY_PREFIX + randomToken(32);
    try {
      const [row] = await db
        .insert(apiKeys)
        .values({
          userId,
          name,
          prefix: key.slice(0, PREFIX_LENGTH),
          keyHash: await sha256Hex(key),
          createdAt: now.toISOString(),
          expiresAt,
        })
        .returning(publicColumns);
      return { ...row!, key };
    } catch (error) {
      // A 48-bit prefix collision is astronomically rare; one retry settles it.
      if (attempt === 0 && isUniqueViolation(error)) continue;
      throw error;
    }
  }
}

export async function listApiKeys(db: Database, userId: number): Promise<ApiKey[]> {
  return db.select(publicColumns).from(apiKeys).where(eq(apiKeys.userId, userId)).orderBy(desc(apiKeys.id));
}

/** Revokes a key of `userId` (any user's when `asAdmin`). Revoking twice is harmless. */
export async function revokeApiKey(db: Database, keyId: number, userId: number, asAdmin: boolean): Promise<ApiKey> {
  const owner = asAdmin ? undefined : eq(apiKeys.userId, userId);
  const [row] = await db
    .update(apiKeys)
    .set({ revokedAt: new Date().toISOString() })
    .where(and(eq(apiKeys.id, keyId), owner, isNull(apiKeys.revokedAt)))
    .returning(publicColumns);
  forgetVerifiedKeys();
  if (row) return row;
  const [existing] = await db
    .select(publicColumns)
    .from(apiKeys)
    .where(and(eq(apiKeys.id, keyId), owner));
  if (!existing) throw notFound(`API key ${keyId}`);
  return existing;
}

const keyLookupFields = {
  keyId: apiKeys.id,
  keyHash: apiKeys.keyHash,
  expiresAt: apiKeys.expiresAt,
  lastUsedAt: apiKeys.lastUsedAt,
  ...credentialUserColumns,
};
// Runs on every API-key request, so it is compiled once (see compileSelect).
const keyLookup = compileSelect<{
  keyId: number;
  keyHash: string;
  expiresAt: string | null;
  lastUsedAt: string | null;
  id: number;
  username: string;
  email: string;
  createdAt: string;
  teamId: string | null;
  disabledAt: string | null;
  levels: string | null;
}>(
  queryBuilder
    .select(keyLookupFields)
    .from(apiKeys)
    .innerJoin(users, eq(users.id, apiKeys.userId))
    .where(and(eq(apiKeys.prefix, sql.placeholder("prefix")), isNull(apiKeys.revokedAt))),
  Object.keys(keyLookupFields) as (keyof typeof keyLookupFields)[],
);

/*
 * Verified keys are remembered by the isolate for KEY_CACHE_MS, so a client's burst of requests
 * costs one lookup instead of one each (the lookup is most of an authenticated request's cost).
 * The price: a key revoked through another isolate keeps working there for at most KEY_CACHE_MS;
 * the isolate that revokes forgets at once (locally there is only one). Expiry is checked on
 * every use. Entries are keyed by the key itself, which the isolate holds anyway while it serves
 * the request: a remembered key is not hashed again (its SHA-256 was about 5 % of a submission's
 * CPU in workerd).
 */
export const KEY_CACHE_MS = 2_000;
const KEY_CACHE_MAX = 1_000;
type KeyRow = Awaited<ReturnType<typeof keyLookup>>[number];
const verifiedKeys = new BoundedMap<string, { row: KeyRow; at: number }>(KEY_CACHE_MAX);

/** Forgets every remembered key (after a revocation). */
export function forgetVerifiedKeys(): void {
  verifiedKeys.clear();
}

async function verifiedRow(db: Database, key: string, now: number): Promise<KeyRow | null> {
  const known = verifiedKeys.get(key);
  if (known && now - known.at < KEY_CACHE_MS) return known.row;
  const hash = await sha256Hex(key);
  const [row] = await keyLookup(db, { prefix: key.slice(0, PREFIX_LENGTH) });
  if (!row || row.disabledAt || !constantTimeEqual(hash, row.keyHash)) return null;
  verifiedKeys.set(key, { row, at: now });
  return row;
}

/**
 * The user of a valid key, or null. One indexed query (none when the isolate verified the key
 * in the last KEY_CACHE_MS); `touch` is the deferred last_used_at write, for the caller to run
 * after the response (ctx.waitUntil).
 */
export async function findApiKeyUser(
  db: Database,
  key: string,
): Promise<{ user: User; keyId: number; touch: () => Promise<unknown> } | null> {
  if (!key.startsWith(API_KEY_PREFIX) || key.length < PREFIX_LENGTH + 8) return null;
  const now = new Date();
  const row = await verifiedRow(db, key, now.getTime());
  if (!row) return null;
  if (row.expiresAt && row.expiresAt <= now.toISOString()) return null;
  const stale = new Date(now.getTime() - LAST_USED_RESOLUTION_MS).toISOString();
  const touch = async () => {
    if (row.lastUsedAt && row.lastUsedAt > stale) return;
    row.lastUsedAt = now.toISOString(); // a remembered row: its later uses need no write
    await db
      .update(apiKeys)
      .set({ lastUsedAt: now.toISOString() })
      .where(and(eq(apiKeys.id, row.keyId), or(isNull(apiKeys.lastUsedAt), lt(apiKeys.lastUsedAt, stale))));
  };
  return { user: toUser(row, row.levels), keyId: row.keyId, touch };
}
