import { asc, eq, or, sql } from "drizzle-orm";
import { highestLevel, LEVEL_PRIORITY, type Level } from "../../shared/levels";
import type { User } from "../../shared/schemas/users";
import type { Database } from "../db/client";
import { isUniqueViolation } from "../db/errors";
import { userLevels, users } from "../db/schema";
import { ApiError, conflict } from "../errors";
import { burnPasswordCheck, hashPassword, verifyPassword } from "./passwords";

export interface NewUser {
  email: string;
  username: string;
  password: string;
  team_id?: string;
}

/** The comma-separated levels of a user, as one column: keeps authentication to one query. */
export const levelsOf = (userId: typeof users.id) =>
  sql<string | null>`(SELECT group_concat(${userLevels.level}) FROM ${userLevels} WHERE ${userLevels.userId} = ${userId})`;

/** Shapes a user row and its levels for the API. */
export function toUser(
  row: { id: number; username: string; email: string; createdAt: string; teamId: string | null },
  levelList: string | null,
): User {
  const held = (levelList ?? "").split(",").filter(Boolean) as Level[];
  const level = highestLevel(held);
  return {
    id: row.id,
    username: row.username,
    email: row.email,
    levels: held.sort((a, b) => LEVEL_PRIORITY[b] - LEVEL_PRIORITY[a]),
    level,
    priority: level ? LEVEL_PRIORITY[level] : 0,
    team_id: row.teamId,
    created_at: row.createdAt,
  };
}

const userColumns = { id: users.id, username: users.username, email: users.email, createdAt: users.createdAt, teamId: users.teamId };

/** What a credential lookup (session or API key) selects of its user: the user, whether disabled, and the levels. */
export const credentialUserColumns = { ...userColumns, disabledAt: users.disabledAt, levels: levelsOf(users.id) };

export async function getUser(db: Database, id: number): Promise<User | null> {
  const [row] = await db
    .select({ ...userColumns, levels: levelsOf(users.id) })
    .from(users)
    .where(eq(users.id, id));
  return row ? toUser(row, row.levels) : null;
}

export async function listUsers(db: Database): Promise<User[]> {
  const rows = await db
    .select({ ...userColumns, levels: levelsOf(users.id) })
    .from(users)
    .orderBy(asc(users.id));
  return rows.map((row: (typeof rows)[number]) => toUser(row, row.levels));
}

/** True until the first user (the first admin) exists. */
export async function needsSetup(db: Database): Promise<boolean> {
  const [row] = await db.select({ n: sql<number>`count(*)` }).from(users);
  return Number(row?.n ?? 0) === 0;
}

/**
 * Creates the first admin, once. The insert is conditional on the users table being empty and
 * runs in one write transaction with the level grant, so of any number of racing requests
 * exactly one succeeds and the rest get 409.
 */
export async function createFirstAdmin(db: Database, input: NewUser): Promise<User> {
  const passwordHash = await hashPassword(input.password);
  const now = new Date().toISOString();
  const [inserted] = await db.$client.batch(
    [
      {
        sql: `INSERT INTO users (username, email, password_hash, created_at)
              SELECT ?, ?, ?, ? WHERE NOT EXISTS (SELECT 1 FROM users)`,
        args: [input.username, input.email, passwordHash, now],
      },
      {
        sql: `INSERT INTO user_levels (user_id, level)
              SELECT id, 'admin' FROM users WHERE username = ? AND NOT EXISTS (SELECT 1 FROM user_levels)`,
        args: [input.username],
      },
    ],
    "write",
  );
  if (!inserted || inserted.rowsAffected !== 1) throw conflict("Setup is already complete: the first admin exists. Log in instead.");
  const user = await getUser(db, Number(inserted.lastInsertRowid));
  if (!user) throw new ApiError(500, "internal", "first admin vanished after creation");
  return user;
}

/** Creates a user holding `levelNames`; 409 when the username or email is taken. */
export async function createUser(db: Database, input: NewUser, levelNames: readonly Level[]): Promise<User> {
  const passwordHash = await hashPassword(input.password);
  const now = new Date().toISOString();
  try {
    const [inserted] = await db.$client.batch(
      [
        {
          sql: `INSERT INTO users (username, email, password_hash, created_at, team_id) VALUES (?, ?, ?, ?, ?)`,
          args: [input.username, input.email, passwordHash, now, input.team_id ?? null],
        },
        ...[...new Set(levelNames)].map((level) => ({
          sql: `INSERT INTO user_levels (user_id, level) SELECT id, ? FROM users WHERE username = ?`,
          args: [level, input.username],
        })),
      ],
      "write",
    );
    const user = await getUser(db, Number(inserted!.lastInsertRowid));
    if (!user) throw new ApiError(500, "internal", "user vanished after creation");
    return user;
  } catch (error) {
    if (isUniqueViolation(error)) throw conflict("A user with this username or email already exists");
    throw error;
  }
}

/** The user whose username or email and password match, or null. Takes the same time either way. */
export async function checkPassword(db: Database, login: string, password: string): Promise<User | null> {
  const [row] = await db
    .select({ ...userColumns, passwordHash: users.passwordHash, disabledAt: users.disabledAt, levels: levelsOf(users.id) })
    .from(users)
    .where(or(eq(users.username, login), eq(users.email, login)));
  if (!row || row.disabledAt) {
    await burnPasswordCheck(password);
    return null;
  }
  return (await verifyPassword(password, row.passwordHash)) ? toUser(row, row.levels) : null;
}
