import type { Migration } from "./migration";

/**
 * v20: a top-level dataset folder's consent to being sent to a cloud provider (issue 27, item 10).
 * - allow_cloud: 1 when the folder's owner (or an admin) lets other users' cloud submissions
 *   package it; 0 (every folder until then) when only its owner's and admins' may
 *   (edge/cloud/package-consent.ts).
 * - allow_cloud_by, allow_cloud_at: who set it last and when (a user id; an ISO time), null
 *   while nobody has.
 */
export const v20: Migration = {
  version: 20,
  name: "dataset_cloud_sharing",
  statements: [
    `ALTER TABLE dataset_folders ADD COLUMN allow_cloud INTEGER NOT NULL DEFAULT 0`,
    `ALTER TABLE dataset_folders ADD COLUMN allow_cloud_by INTEGER`,
    `ALTER TABLE dataset_folders ADD COLUMN allow_cloud_at TEXT`,
  ],
};
