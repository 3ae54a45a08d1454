import type { StallPolicy } from "../../shared/schemas/queue";
import { levelAtLeast, type Level } from "../../shared/levels";
import type { Database } from "../db/client";
import { ApiError, notFound } from "../errors";
import { getSetting } from "../settings-store";
import { policyOf } from "./lifecycle/stall";

/*
 * Each user's own stall policy (users.stall_policy; null: the service's default from
 * PUT /api/admin/stall-detection). A user reads and sets their own; an admin anyone's.
 */

function checkMayAct(caller: { id: number; level: Level | null }, userId: number): void {
  if (caller.id !== userId && !levelAtLeast(caller.level, "admin"))
    throw new ApiError(403, "forbidden", "You can read and set only your own stall policy; an admin can set anyone's");
}

/**
 * A user's stall policy: their own choice and what applies.
 *
 * @example
 * await userStallPolicy(db, caller, 7); // { user_id: 7, policy: null, effective: "notify" }
 */
export async function userStallPolicy(db: Database, caller: { id: number; level: Level | null }, userId: number) {
  checkMayAct(caller, userId);
  const [row, rules] = await Promise.all([
    db.$client.execute({ sql: "SELECT stall_policy FROM users WHERE id = ?", args: [userId] }),
    getSetting(db, "stall_detection"),
  ]);
  if (!row.rows[0]) throw notFound(`User ${userId}`);
  const own = row.rows[0].stall_policy;
  return { user_id: userId, policy: policyOf(own, rules) === own ? (own as StallPolicy) : null, effective: policyOf(own, rules) };
}

/** Sets a user's own stall policy (null: the default); answers as userStallPolicy. */
export async function setUserStallPolicy(
  db: Database,
  caller: { id: number; level: Level | null },
  userId: number,
  policy: StallPolicy | null,
) {
  checkMayAct(caller, userId);
  const done = await db.$client.execute({ sql: "UPDATE users SET stall_policy = ? WHERE id = ? RETURNING id", args: [policy, userId] });
  if (!done.rows.length) throw notFound(`User ${userId}`);
  return userStallPolicy(db, caller, userId);
}
