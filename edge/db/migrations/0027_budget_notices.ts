import type { Migration } from "./migration";

/**
 * v27: budget notices (issue 30, Build 4 and 5). One row per budget, period and state that has
 * been announced (budget.warning at the warning share, budget.exceeded at 100 %), so each crossing
 * is told once per period however many checks see it. `budget` is `user:<id>` or `team:<id>`.
 */
export const v27: Migration = {
  version: 27,
  name: "budget_notices",
  statements: [
    `CREATE TABLE budget_notices (
      budget TEXT NOT NULL,
      period_start TEXT NOT NULL,
      state TEXT NOT NULL,
      used REAL NOT NULL,
      budget_limit REAL NOT NULL,
      noticed_at TEXT NOT NULL,
      PRIMARY KEY (budget, period_start, state)
    )`,
  ],
};
