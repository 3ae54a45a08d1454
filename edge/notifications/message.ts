import type { NotificationKind } from "../../shared/schemas/notifications";

/*
 * What a notification says, once per channel: an e-mail (subject, text, HTML), a Slack message
 * (`text` as mrkdwn and `blocks`, as Slack's incoming webhooks take them) and a webhook body
 * (`{type, timestamp, data}`, as the job webhooks'). Every value that came from a user (a job's
 * name, an error) is escaped for the format it lands in: HTML in the e-mail's HTML part, Slack's
 * `&`, `<` and `>` in its text.
 */

/** What a notification is about and what is known of it; null fields are left out of the message. */
export interface Facts {
  job_id?: string | null;
  job_name?: string | null;
  owner?: string | null;
  status?: string | null;
  queue_position?: number | null;
  expected_start_at?: string | null;
  expected_end_at?: string | null;
  estimated_cost_usd?: number | null;
  error?: string | null;
  decision?: string | null;
  reason?: string | null;
  /** approval.needed, to an admin: the signed single-use link that decides it. */
  approval_url?: string | null;
  /** Any other fact a later kind brings (a budget's use, a GPU's fault). */
  [more: string]: string | number | null | undefined;
}

export interface Rendered {
  subject: string;
  text: string;
  html: string;
  slack: { text: string; blocks: unknown[] };
  webhook: { type: string; timestamp: string; data: Facts };
}

const HEADLINES: Record<NotificationKind, string> = {
  "job.started": "started",
  "job.stalled": "looks stalled: no progress",
  "job.completed": "completed",
  "job.failed": "failed",
  "approval.needed": "needs an admin's approval",
  "approval.decided": "approval decided",
  "budget.warning": "budget at 80 %",
  "budget.exceeded": "budget exceeded",
  "gpu.quarantined": "GPU taken out of allocation",
};

const LABELS: [keyof Facts, string][] = [
  ["job_id", "Job"],
  ["owner", "Owner"],
  ["status", "Status"],
  ["decision", "Decision"],
  ["reason", "Reason"],
  ["queue_position", "Queue position"],
  ["expected_start_at", "Expected start"],
  ["expected_end_at", "Expected end"],
  ["estimated_cost_usd", "Estimated cost (USD)"],
  ["error", "Error"],
  ["stalled_since", "Last step at"],
  ["last_step", "Last step"],
  ["policy", "Stall policy"],
  ["budget", "Budget"],
  ["period_start", "Period from"],
  ["used_usd", "Used (USD)"],
  ["limit_usd", "Budget (USD)"],
  ["on_exceeded", "When used up"],
  ["worker", "Box"],
  ["gpu_index", "GPU"],
  ["requeued_jobs", "Jobs requeued"],
  ["failed_jobs", "Jobs failed"],
];

/** Escapes text for HTML (element content and quoted attributes). */
export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!);
}

/** Escapes text for Slack mrkdwn: only `&`, `<` and `>` are control characters there. */
export function escapeSlack(value: string): string {
  return value.replace(/[&<>]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;" })[c]!);
}

/**
 * The message for a kind and its facts, in every channel's format.
 *
 * @example
 * renderMessage("job.completed", { job_id: "local-1", job_name: "flux <b>", status: "completed" }, new Date());
 */
export function renderMessage(kind: NotificationKind, facts: Facts, at: Date): Rendered {
  const what = typeof facts.worker === "string" ? `${facts.worker} GPU ${facts.gpu_index ?? "?"}` : facts.budget;
  const name = facts.job_name ?? facts.job_id ?? what ?? "";
  const subject = `[training] ${name ? `${name}: ` : ""}${HEADLINES[kind]}`.replace(/[\r\n]+/g, " ");
  const lines = LABELS.flatMap(([key, label]) => {
    const value = facts[key];
    return value === null || value === undefined || value === "" ? [] : [[label, String(value)] as const];
  });
  const link = facts.approval_url ?? null;
  const text = [
    subject,
    "",
    ...lines.map(([label, value]) => `${label}: ${value}`),
    ...(link ? ["", `Approve or reject (single use, expires in 24 h): ${link}`] : []),
  ].join("\n");
  const html = [
    "<!doctype html><html><body>",
    `<h1>${escapeHtml(subject)}</h1>`,
    "<table>",
    ...lines.map(([label, value]) => `<tr><th align="left">${escapeHtml(label)}</th><td>${escapeHtml(value)}</td></tr>`),
    "</table>",
    ...(link ? [`<p><a href="${escapeHtml(link)}">Approve or reject</a> (single use, expires in 24 h)</p>`] : []),
    "</body></html>",
  ].join("\n");
  const slackLines = lines.map(([label, value]) => `*${label}:* ${escapeSlack(value)}`);
  const slackText = [`*${escapeSlack(subject)}*`, ...slackLines, ...(link ? [`<${link}|Approve or reject>`] : [])].join("\n");
  return {
    subject,
    text,
    html,
    slack: { text: slackText, blocks: [{ type: "section", text: { type: "mrkdwn", text: slackText } }] },
    webhook: { type: kind, timestamp: at.toISOString(), data: facts },
  };
}
