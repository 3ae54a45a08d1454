import type { Migration } from "./migration";

/** v5: training environments - an option map and a dataloader per name. */
export const v5: Migration = {
  version: 5,
  name: "environments",
  statements: [
    `CREATE TABLE environments (
      id INTEGER PRIMARY KEY AUTOINCREMENT,
      name TEXT NOT NULL UNIQUE,
      description TEXT,
      model_family TEXT,
      model_flavour TEXT,
      model_type TEXT,
      lora_type TEXT,
      tags TEXT NOT NULL DEFAULT '[]',
      config TEXT NOT NULL DEFAULT '{}',
      dataloader TEXT NOT NULL DEFAULT '[]',
      created_by INTEGER REFERENCES users (id),
      created_at TEXT NOT NULL,
      updated_at TEXT NOT NULL
    )`,
  ],
};
