/** Settings: limits, approval rules, cloud and provider settings, rates, metrics, audit. Part of `endpoints` (./endpoints.ts); each with its route's own schemas. */
export const settingsEndpoints = {} as const;
