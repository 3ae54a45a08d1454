import type { Database } from "../db/client";

/** The id of the user named `username`, or undefined. */
export async function userIdByName(db: Database, username: string): Promise<number | undefined> {
  const result = await db.$client.execute({ sql: "SELECT id FROM users WHERE username = ?", args: [username] });
  const row = result.rows[0];
  return row ? Number(row.id) : undefined;
}
