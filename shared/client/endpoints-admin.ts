/** Administration: users, API keys, workers and the system view. Part of `endpoints` (./endpoints.ts); each with its route's own schemas. */
export const adminEndpoints = {} as const;
