/**
 * The hosted providers this service knows. Settings (PUT /api/cloud/providers/{provider}) and
 * webhook intake (POST /api/webhooks/{provider}) accept only these names.
 */
export const PROVIDERS = [
  {
    name: "replicate",
    display_name: "Replicate",
    capabilities: ["cloud_training", "webhooks", "cost_tracking", "storage_endpoint"],
  },
] as const;

export type ProviderName = (typeof PROVIDERS)[number]["name"];

export function findProvider(name: string) {
  return PROVIDERS.find((p) => p.name === name) ?? null;
}
