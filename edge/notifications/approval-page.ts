import { escapeHtml } from "./message";

/*
 * The pages an approval link shows: a confirmation with its two forms (GET), the outcome (POST),
 * or why the link cannot be used. Plain HTML with no script or style, every value escaped; the
 * route sends them with a CSP that allows only a form posting back to this origin.
 */

/** The page's own Content-Security-Policy: nothing loads, forms post to this origin only. */
export const APPROVAL_PAGE_CSP = "default-src 'none'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

const page = (title: string, body: string) =>
  `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width"><title>${escapeHtml(title)}</title></head><body><main><h1>${escapeHtml(title)}</h1>${body}</main></body></html>`;

/** The confirmation page: the job, and a form to approve and one to reject (with a reason). */
export function confirmationPage(job: { jobId: string; name: string; owner: string }, admin: string): string {
  return page(
    "Approve or reject a job",
    `<p>Job <strong>${escapeHtml(job.name)}</strong> (${escapeHtml(job.jobId)}) by ${escapeHtml(job.owner)} waits for an admin's approval.
You decide as <strong>${escapeHtml(admin)}</strong>; this link works once.</p>
<form method="post"><input type="hidden" name="decision" value="approve"><button type="submit">Approve</button></form>
<form method="post"><input type="hidden" name="decision" value="reject"><label for="reason">Reason</label>
<input id="reason" name="reason" required maxlength="500"><button type="submit">Reject</button></form>`,
  );
}

/** The outcome page after a decision. */
export function decidedPage(jobId: string, decision: "approved" | "rejected"): string {
  return page(`Job ${decision}`, `<p>Job ${escapeHtml(jobId)} is ${decision}. This link cannot be used again.</p>`);
}

const REFUSALS: Record<string, string> = {
  invalid: "This link is not valid: it may have been altered or copied incompletely. Decide from the queue instead.",
  expired: "This link has expired. Decide from the queue (#/queue) instead.",
  used: "This link was already used: the decision it allowed has been made.",
  not_admin: "The admin this link was sent to is no longer an admin.",
};

/** The page of a link that cannot be used, or of a job that no longer waits. */
export function refusedPage(why: keyof typeof REFUSALS | string, detail?: string): string {
  return page("This approval link cannot be used", `<p>${escapeHtml(detail ?? REFUSALS[why] ?? why)}</p>`);
}
