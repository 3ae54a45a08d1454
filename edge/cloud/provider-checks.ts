import { findProvider, PROVIDERS } from "../../shared/providers";
import { ApiError } from "../errors";
import { breakerStates } from "./breaker";
import { providerClient, type ProviderContext } from "./registry";
import { ProviderError } from "./types";

/*
 * Whether each provider's credentials validate (GET /api/cloud/providers, the health check). A
 * check calls the provider, so its answer is kept in provider_state and reused while younger
 * than the caller's `maxAgeSeconds`: the public providers list cannot be used to make this
 * service hammer a provider. A check's message may quote the provider's answer (an account
 * name, an error body): only admins see it; public answers word it with publicMessage.
 */

export interface ProviderCheck {
  name: string;
  valid: boolean;
  message: string;
  latency_ms: number | null;
  checked_at: string;
  breaker_state: "closed" | "open" | "half_open";
}

async function freshCheck(ctx: ProviderContext, name: string): Promise<{ valid: boolean; message: string; latency_ms: number | null }> {
  try {
    return await (await providerClient(ctx, name)).validate_credentials();
  } catch (error) {
    if (error instanceof ApiError || error instanceof ProviderError) return { valid: false, message: error.message, latency_ms: null };
    throw error;
  }
}

/**
 * Each usable provider's credential check, from the last one when younger than `maxAgeSeconds`,
 * else checked now (in parallel) and remembered.
 *
 * @example
 * const checks = await checkProviders(ctx, 10); // health: at most 10 s old
 */
export async function checkProviders(ctx: ProviderContext, maxAgeSeconds: number): Promise<ProviderCheck[]> {
  const db = ctx.db;
  const usable = PROVIDERS.filter((p) => !p.coming_soon).map((p) => p.name);
  const stored = await db.$client.execute(
    "SELECT provider, credentials_valid, credentials_message, validated_at, validation_latency_ms FROM provider_state",
  );
  const byName = new Map(stored.rows.map((r) => [String(r.provider), r as Record<string, unknown>]));
  const now = Date.now();
  const checks = await Promise.all(
    usable.map(async (name): Promise<Omit<ProviderCheck, "breaker_state">> => {
      const row = byName.get(name);
      const at = row?.validated_at ? Date.parse(String(row.validated_at)) : 0;
      if (row && row.credentials_valid !== null && now - at < maxAgeSeconds * 1000)
        return {
          name,
          valid: Number(row.credentials_valid) === 1,
          message: String(row.credentials_message ?? ""),
          latency_ms: row.validation_latency_ms === null ? null : Number(row.validation_latency_ms),
          checked_at: String(row.validated_at),
        };
      const check = await freshCheck(ctx, name);
      const checkedAt = new Date().toISOString();
      await db.$client.execute({
        sql: `INSERT INTO provider_state (provider, credentials_valid, credentials_message, validated_at, validation_latency_ms) VALUES (?1, ?2, ?3, ?4, ?5)
              ON CONFLICT (provider) DO UPDATE SET credentials_valid = ?2, credentials_message = ?3, validated_at = ?4, validation_latency_ms = ?5`,
        args: [name, check.valid ? 1 : 0, check.message, checkedAt, check.latency_ms],
      });
      return { name, ...check, checked_at: checkedAt };
    }),
  );
  // Read after the checks, which may have moved a breaker.
  const breakers = new Map((await breakerStates(db)).map((b) => [b.provider, b.state]));
  return checks.map((c) => ({ ...c, breaker_state: breakers.get(c.name) ?? "closed" }));
}

/**
 * A check as public answers (the providers list, the health check) may word it: whether it is
 * valid, in the service's words, never the provider's answer. Worker orchestration's checks are
 * the service's own count of its workers and are shown as they are.
 *
 * @example
 * publicMessage({ name: "replicate", valid: false, message: "Replicate answered 500: <html>..." }); // "credentials not valid; ..."
 */
export function publicMessage(check: Pick<ProviderCheck, "name" | "valid" | "message">): string {
  if (findProvider(check.name)?.kind === "workers") return check.message;
  return check.valid ? "credentials accepted" : `credentials not valid; an admin sees why at GET /api/cloud/providers/${check.name}`;
}

/**
 * Forgets a provider's last credential check, so the next one asks the provider again (its
 * settings changed: another API root, proxy or token).
 */
export async function forgetProviderCheck(ctx: Pick<ProviderContext, "db">, name: string): Promise<void> {
  await ctx.db.$client.execute({ sql: "UPDATE provider_state SET credentials_valid = NULL WHERE provider = ?", args: [name] });
}
