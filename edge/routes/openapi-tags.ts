/**
 * The API document's prose, kept as Markdown in edge/routes/api-docs/: overview.md is the document's description
 * (levels, errors, rate limiting, security headers: what every area shares) and one file per area is that tag's
 * description (what the area's operations share). Per-operation details live on the routes themselves; the
 * operator's guide is README.md. The Worker bundle embeds the files as text (edge/local/bundle.ts).
 */
import audit from "./api-docs/audit.md";
import authentication from "./api-docs/authentication.md";
import cloud from "./api-docs/cloud.md";
import dashboard from "./api-docs/dashboard.md";
import datasets from "./api-docs/datasets.md";
import documentation from "./api-docs/documentation.md";
import environments from "./api-docs/environments.md";
import health from "./api-docs/health.md";
import metrics from "./api-docs/metrics.md";
import notifications from "./api-docs/notifications.md";
import overview from "./api-docs/overview.md";
import providers from "./api-docs/providers.md";
import queue from "./api-docs/queue.md";
import runs from "./api-docs/runs.md";
import spend from "./api-docs/spend.md";
import storage from "./api-docs/storage.md";
import system from "./api-docs/system.md";
import training from "./api-docs/training.md";
import users from "./api-docs/users.md";
import webhooks from "./api-docs/webhooks.md";
import workers from "./api-docs/workers.md";

/** Where overview.md takes the table of levels generated from shared/permissions.ts. */
export const LEVELS_TABLE_MARK = "<!-- levels: the table generated from shared/permissions.ts -->";

/** A file's text as its description: the final newline a text file ends with is not part of it. */
const prose = (text: string) => text.trimEnd();

/**
 * The document's description: overview.md with the table of levels in its place.
 *
 * @example
 * apiDescription(levelsTable(ROUTE_ACCESS));
 */
export function apiDescription(levelsTable: string): string {
  const [before, after, ...more] = prose(overview).split(LEVELS_TABLE_MARK);
  if (after === undefined || more.length > 0) throw new Error(`api-docs/overview.md must hold ${LEVELS_TABLE_MARK} once`);
  return before + levelsTable + after;
}

/** One entry per area, in the order the documentation pages show them. */
export const TAGS: { name: string; description: string }[] = [
  { name: "Authentication", description: prose(authentication) },
  { name: "Users", description: prose(users) },
  { name: "Environments", description: prose(environments) },
  { name: "Datasets", description: prose(datasets) },
  { name: "Queue", description: prose(queue) },
  { name: "Training", description: prose(training) },
  { name: "Runs", description: prose(runs) },
  { name: "Webhooks", description: prose(webhooks) },
  { name: "Notifications", description: prose(notifications) },
  { name: "Workers", description: prose(workers) },
  { name: "Storage", description: prose(storage) },
  { name: "System", description: prose(system) },
  { name: "Providers", description: prose(providers) },
  { name: "Cloud", description: prose(cloud) },
  { name: "Spend", description: prose(spend) },
  { name: "Audit", description: prose(audit) },
  { name: "Metrics", description: prose(metrics) },
  { name: "Health", description: prose(health) },
  { name: "Dashboard", description: prose(dashboard) },
  { name: "Documentation", description: prose(documentation) },
];
