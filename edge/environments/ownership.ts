import { eq } from "drizzle-orm";
import type { Level } from "../../shared/levels";
import type { Database } from "../db/client";
import { environments } from "../db/schema";
import { ApiError, notFound } from "../errors";

/*
 * Environments have owners (README "Security in short"): `created_by`. Changing one (update,
 * rename, dataloader, delete, activate) is for its owner, leads and admins. Each change is one
 * statement conditional on that (shared/levels.ts ownerScope); when it changes nothing, this
 * module says why.
 */

/** Who asks for a change: what the ownership rule needs of the caller. */
export interface Actor {
  id: number;
  level: Level | null;
}

/** 404 when there is no such environment, else 403 `not_owner`: the reasons a conditional change did nothing. */
export async function whyUnchanged(db: Database, name: string): Promise<ApiError> {
  const [row] = await db.select({ id: environments.id }).from(environments).where(eq(environments.name, name));
  if (!row) return notFound(`Environment ${JSON.stringify(name)}`);
  return new ApiError(
    403,
    "not_owner",
    `Environment ${JSON.stringify(name)} belongs to another user: only its owner, a lead or an admin may change, activate or delete it`,
  );
}
