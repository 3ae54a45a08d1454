import { MAX_WEBHOOK_TARGETS, MIN_REPORTING_INTERVAL_SECONDS } from "./targets";

/*
 * Outbound webhooks: what a job's `--webhook_config` receivers are sent. Lifecycle
 * moments go out as they happen; progress at most once per `--webhook_reporting_interval`
 * seconds (default 30). Bodies are JSON: {type, job_id, timestamp, data}.
 */

export interface WebhookTarget {
  url: string;
  type: string;
  /** Own Standard Webhooks secret (whsec_...), else the service's. */
  secret: string | null;
}

export interface WebhookConfig {
  targets: WebhookTarget[];
  intervalSeconds: number;
}

export const DEFAULT_REPORTING_INTERVAL_SECONDS = 30;

/** The receivers of a job from its options (invalid entries are skipped: start already refused them). */
export function webhookConfig(options: Record<string, unknown>): WebhookConfig {
  const interval = Number(options["--webhook_reporting_interval"]);
  // Bounded whatever was stored before the checks: progress at most every MIN_REPORTING_INTERVAL_SECONDS.
  const config: WebhookConfig = {
    targets: [],
    intervalSeconds:
      Number.isFinite(interval) && interval >= 0 ? Math.max(interval, MIN_REPORTING_INTERVAL_SECONDS) : DEFAULT_REPORTING_INTERVAL_SECONDS,
  };
  const raw = options["--webhook_config"];
  if (typeof raw !== "string" || !raw.trim()) return config;
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    return config;
  }
  if (!Array.isArray(parsed)) return config;
  for (const entry of parsed.slice(0, MAX_WEBHOOK_TARGETS)) {
    const e = entry as { callback_url?: unknown; webhook_type?: unknown; signing_secret?: unknown };
    if (typeof e?.callback_url !== "string") continue;
    config.targets.push({
      url: e.callback_url,
      type: typeof e.webhook_type === "string" ? e.webhook_type : "raw",
      secret: typeof e.signing_secret === "string" && e.signing_secret.startsWith("whsec_") ? e.signing_secret : null,
    });
  }
  return config;
}

/** The lifecycle message an event makes, if any ("job.progress" is throttled by the caller). */
export function lifecycleOf(event: { type: string; data?: unknown }): { type: string; data: Record<string, unknown> } | null {
  const data = (event.data ?? {}) as Record<string, unknown>;
  switch (event.type) {
    case "training.started":
      return { type: "job.started", data: { total_steps: data.total_steps ?? null, resumed_from_step: data.resumed_from_step ?? null } };
    case "training.progress":
      return {
        type: "job.progress",
        data: {
          step: data.step ?? null,
          total_steps: data.total_steps ?? null,
          percent: data.percent ?? null,
          loss: data.loss ?? null,
          epoch: data.epoch ?? null,
        },
      };
    case "checkpoint.saved":
      return { type: "job.checkpoint", data: { step: data.step ?? null, path: data.path ?? null } };
    case "validation.completed":
      return { type: "job.validation", data: { step: data.step ?? null } };
    case "training.stalled":
      return {
        type: "job.stalled",
        data: {
          since: data.since ?? null,
          last_step: data.last_step ?? null,
          threshold_seconds: data.threshold_seconds ?? null,
          policy: data.policy ?? null,
        },
      };
    case "training.stall_cleared":
      return { type: "job.stall_cleared", data: { step: data.step ?? null, stalled_since: data.stalled_since ?? null } };
    default:
      return null;
  }
}
