import type { Database } from "../../db/client";
import { checkApprovalLink, useApprovalLink, type ApprovalLink, type LinkRefusal } from "../../notifications/approval-link";
import { approveJob } from "./approve";
import type { Actor, Change } from "./effects";
import { rejectJob } from "./reject";

/*
 * Deciding a job's approval from the link an approval.needed message carried
 * (edge/notifications/approval-link.ts): the link names its job and its admin, so it decides that
 * job only, as that admin (audited as them), once. An admin who is no longer one, a used, expired
 * or altered link: refused, nothing changes.
 */

export interface LinkView {
  link: ApprovalLink;
  admin: { id: number; username: string };
  job: { jobId: string; name: string; owner: string; status: string };
}

/** What the link is for (the confirmation page), or why it cannot be used. */
export async function viewApprovalLink(db: Database, token: string): Promise<LinkView | LinkRefusal | "not_admin"> {
  const link = await checkApprovalLink(db, token);
  if (typeof link === "string") return link;
  const { rows } = await db.$client.execute({
    sql: `SELECT a.username AS admin_name,
                 EXISTS (SELECT 1 FROM user_levels l WHERE l.user_id = a.id AND l.level = 'admin') AND a.disabled_at IS NULL AS still_admin,
                 q.config_name, q.metadata, q.status, o.username AS owner
          FROM users a, queue_entries q JOIN users o ON o.id = q.user_id
          WHERE a.id = ? AND q.job_id = ?`,
    args: [link.adminId, link.jobId],
  });
  const row = rows[0];
  if (!row) return "invalid";
  if (!Number(row.still_admin)) return "not_admin";
  const metadata = row.metadata ? (JSON.parse(String(row.metadata)) as Record<string, unknown>) : {};
  return {
    link,
    admin: { id: link.adminId, username: String(row.admin_name) },
    job: {
      jobId: link.jobId,
      name: typeof metadata.name === "string" ? metadata.name : String(row.config_name ?? link.jobId),
      owner: String(row.owner),
      status: String(row.status),
    },
  };
}

/**
 * Uses the link once and decides its job: approve, or reject with a reason. Returns the change and
 * the admin it is audited as; throws a 409 when the job no longer waits for approval (the link is
 * used all the same).
 *
 * @example
 * const { change, actor } = await decideByLink(db, token, { approve: true }, request);
 */
export async function decideByLink(
  db: Database,
  token: string,
  decision: { approve: true } | { approve: false; reason: string },
  request: { client_ip: string | null; user_agent: string | null },
): Promise<{ change: Change; actor: Actor; view: LinkView } | LinkRefusal | "not_admin"> {
  const view = await viewApprovalLink(db, token);
  if (typeof view === "string") return view;
  if (!(await useApprovalLink(db, view.link))) return "used";
  const actor: Actor = { user_id: view.admin.id, username: view.admin.username, ...request };
  const change = decision.approve
    ? await approveJob(db, view.link.jobId, view.admin.id)
    : await rejectJob(db, view.link.jobId, view.admin.id, decision.reason);
  for (const entry of change.audit ?? []) entry.details = { ...(entry.details ?? {}), via: "approval link" };
  return { change, actor, view };
}
