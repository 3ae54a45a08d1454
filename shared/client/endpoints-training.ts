/** Training control and job views: validation and checkpoint on demand, stop, environments. Part of `endpoints` (./endpoints.ts); each with its route's own schemas. */
export const trainingEndpoints = {} as const;
