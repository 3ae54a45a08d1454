import { findProvider } from "../../shared/providers";
import type { Database } from "../db/client";
import type { Env } from "../env";
import { ApiError, notFound } from "../errors";
import type { Logger } from "../log";
import { getProviderSettings, outboundSettingsProblems, type StoredProviderSettings } from "./provider-settings";
import { providerFetch } from "./outbound";
import { managedRefusal } from "./providers/managed";
import { REPLICATE_WEBHOOKS, ReplicateProvider } from "./providers/replicate";
import { WorkersProvider } from "./providers/workers";
import { resolveSecret } from "./secrets";
import type { CloudProvider, WebhookReader } from "./types";

/** What building a provider client needs: the Worker's bindings (secrets, outbound), the database and a log. */
export interface ProviderContext {
  env: Env;
  db: Database;
  log: Logger;
}

/**
 * The hosted provider's client, from its settings (base URL, training model and destination) and
 * its API token, resolved from the secrets at each use so a rotated token applies at once. 409
 * naming what an admin must set when it is not configured; the token's value is never in a message.
 */
export async function hostedClient(
  ctx: ProviderContext,
  name: string,
  settings?: StoredProviderSettings,
): Promise<{ client: ReplicateProvider; settings: StoredProviderSettings }> {
  const stored = settings ?? (await getProviderSettings(ctx.db, name));
  // Settings saved before the outbound rules existed are checked at each use too: the token
  // never goes to a private address, nor is another secret sent as it, unless an admin allowed it.
  const problems = outboundSettingsProblems(name, stored);
  if (problems.length)
    throw new ApiError(
      409,
      "provider_settings_refused",
      `${name}'s settings are no longer accepted: ${problems.map((p) => `${p.path} ${p.message}`).join("; ")}; an admin corrects them with PUT /api/cloud/providers/${name}`,
    );
  const token = await resolveSecret(ctx.env, stored.api_token_secret);
  if (!token)
    throw new ApiError(
      409,
      "provider_token_missing",
      `${name}'s API token is not set: put it in the secret ${stored.api_token_secret} (an environment variable, a secret file, or the vault; README "Cloud training")`,
    );
  const [owner = "", model = ""] = (stored.training_model ?? "").split(":")[0]!.split("/");
  if (!stored.training_model || !owner || !model)
    throw new ApiError(
      409,
      "provider_not_configured",
      `${name} has no training model: an admin sets training_model ("owner/name:version") with PUT /api/cloud/providers/${name}`,
    );
  const client = new ReplicateProvider({
    baseUrl: stored.api_base_url,
    token: token.value,
    model: stored.training_model,
    // Never the trainer model itself: submission refuses a job until an admin names one (submit.ts).
    destination: stored.training_destination ?? "",
    fetch: providerFetch(ctx, name, stored),
  });
  return { client, settings: stored };
}

/**
 * The client of any known provider: the hosted one, worker orchestration, or a refusal for the
 * managed service (coming soon). 404 for an unknown name.
 */
export async function providerClient(ctx: ProviderContext, name: string): Promise<CloudProvider> {
  const known = findProvider(name);
  if (!known) throw notFound(`Provider "${name}"`);
  if (known.kind === "managed") throw managedRefusal();
  if (known.kind === "workers") return new WorkersProvider(ctx.db);
  return (await hostedClient(ctx, name)).client;
}

/**
 * How the named provider's webhook payloads are read (the hosted provider's own parser); null
 * for an unknown provider and for one whose deliveries concern no cloud job (worker
 * orchestration, the managed service).
 *
 * @example
 * webhookReader("replicate")?.job(payload).status; // "processing"
 */
export function webhookReader(name: string): WebhookReader | null {
  return findProvider(name)?.kind === "hosted" ? REPLICATE_WEBHOOKS : null;
}
