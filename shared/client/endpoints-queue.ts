/** Queue operations beyond submit/list/cancel: approvals, priorities, limits, history. Part of `endpoints` (./endpoints.ts); each with its route's own schemas. */
export const queueEndpoints = {} as const;
