/** Administration: users, API keys, workers, provider and cloud settings, metrics, audit. Part of `endpoints` (./endpoints.ts); each with its route's own schemas. */
export const adminEndpoints = {} as const;
