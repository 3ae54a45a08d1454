import { v1 } from "./0001_queue_entries";
import { v2 } from "./0002_queue_fair_share_and_approvals";
import { v3 } from "./0003_queue_gpu_allocation";
import { v4 } from "./0004_users_and_credentials";
import { v5 } from "./0005_environments";
import { v6 } from "./0006_scheduler_and_workers";
import { v7 } from "./0007_job_events";
import { v8 } from "./0008_job_commands";
import { v9 } from "./0009_audit_log";
import { v10 } from "./0010_provider_settings";
import { v11 } from "./0011_storage_credentials";
import { v12 } from "./0012_storage_uploads";
import { v13 } from "./0013_ownership_and_snapshots";
import { v14 } from "./0014_bounds";
import { v15 } from "./0015_cloud_jobs";
import { v16 } from "./0016_expected_ends";
import { v17 } from "./0017_worker_trainers";
import { v18 } from "./0018_job_attempts";
import { v19 } from "./0019_event_and_dataset_usage";
import { v20 } from "./0020_dataset_cloud_sharing";
import { v21 } from "./0021_capacity_version";
import { v22 } from "./0022_kept_runs";
import { v23 } from "./0023_gpu_health";
import { v24 } from "./0024_retry_and_idempotency";
import { v25 } from "./0025_stall_watch";
import { v26 } from "./0026_notifications";
import { v27 } from "./0027_budget_notices";
import { v28 } from "./0028_scheduling_order_index";
import { v29 } from "./0029_local_box_busy_unversioned";
import type { Migration } from "./migration";

export type { Migration } from "./migration";

/** Every schema version, in order. Append; never edit one that has shipped. */
export const MIGRATIONS: readonly Migration[] = [
  v1,
  v2,
  v3,
  v4,
  v5,
  v6,
  v7,
  v8,
  v9,
  v10,
  v11,
  v12,
  v13,
  v14,
  v15,
  v16,
  v17,
  v18,
  v19,
  v20,
  v21,
  v22,
  v23,
  v24,
  v25,
  v26,
  v27,
  v28,
  v29,
];
export const LATEST_SCHEMA_VERSION = MIGRATIONS[MIGRATIONS.length - 1]!.version;
