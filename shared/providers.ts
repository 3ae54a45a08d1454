/**
 * The cloud providers this service knows (README "Cloud training"): the hosted provider,
 * worker orchestration (this service's own GPU workers) and a managed service listed as coming
 * soon. Settings (PUT /api/cloud/providers/{provider}) and webhook intake (POST
 * /api/webhooks/{provider}) accept only these names.
 */
export const PROVIDERS = [
  {
    name: "replicate",
    display_name: "Replicate",
    kind: "hosted",
    capabilities: ["cloud_training", "webhooks", "cost_tracking", "live_logs", "storage_endpoint"],
    coming_soon: false,
  },
  {
    name: "workers",
    display_name: "Worker orchestration",
    kind: "workers",
    capabilities: ["cloud_training", "live_logs"],
    coming_soon: false,
  },
  {
    name: "managed",
    display_name: "Managed service",
    kind: "managed",
    capabilities: [],
    coming_soon: true,
  },
] as const;

export type ProviderName = (typeof PROVIDERS)[number]["name"];

export function findProvider(name: string) {
  return PROVIDERS.find((p) => p.name === name) ?? null;
}
