import { createRoute, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import type { AppEnv } from "../app-env";
import {
  ApprovalLinkDecision,
  ApprovalLinkParam,
  DeliveriesQuery,
  NotificationDeliveryList,
  NotificationPreferences,
  NotificationPreferencesUpdate,
  SmtpSettings,
  SmtpSettingsUpdate,
  SmtpTest,
  SmtpTestAnswer,
} from "../../shared/schemas/notifications";
import { auditLater } from "../audit/trail";
import { ApiError } from "../errors";
import { decideByLink, viewApprovalLink } from "../jobs/lifecycle/decide-by-link";
import { applyEffects } from "../jobs/lifecycle/effects";
import { principalOf } from "../middleware/authorize";
import { APPROVAL_PAGE_CSP, confirmationPage, decidedPage, refusedPage } from "../notifications/approval-page";
import { listDeliveries } from "../notifications/deliveries";
import { readPreferences, savePreferences } from "../notifications/preferences";
import { readSmtp, saveSmtp, testSmtp } from "../notifications/smtp-settings";
import { createRouter } from "../router";
import { effectsOf } from "./effects-context";
import { error, json, jsonBody } from "./openapi";

/** Notifications: your preferences and deliveries, the admin's SMTP settings, approval links. */
export const notificationsRoutes = createRouter();

const tags = ["Notifications"];

notificationsRoutes.openapi(
  createRoute({
    method: "get",
    path: "/api/users/me/notifications",
    tags,
    summary: "Your notification preferences",
    description:
      "The kinds you want and your channels, with your webhook's signing secret (`webhook_secret`, made when you first save). Never saved: every kind, no channel (nothing is sent).",
    responses: { 200: json(NotificationPreferences, "Your preferences"), 401: error("No valid credential") },
  }),
  async (c) => c.json(await readPreferences(c.get("db"), principalOf(c).user.id), 200),
);

notificationsRoutes.openapi(
  createRoute({
    method: "put",
    path: "/api/users/me/notifications",
    tags,
    summary: "Save your notification preferences",
    description:
      "The whole set: `kinds` you want and `channels` (`webhook`, `slack`, `email`; null: off). A webhook or Slack URL on a loopback or private address or a local name is refused (422 `notification_target_refused`) unless an admin allows private targets (`PUT /api/admin/webhooks`).",
    request: jsonBody(NotificationPreferencesUpdate),
    responses: {
      200: json(NotificationPreferences, "Saved"),
      401: error("No valid credential"),
      422: error("Invalid body, or a target on a private address"),
    },
  }),
  async (c) => c.json(await savePreferences(c.get("db"), principalOf(c).user.id, c.req.valid("json")), 200),
);

notificationsRoutes.openapi(
  createRoute({
    method: "get",
    path: "/api/users/me/notifications/deliveries",
    tags,
    summary: "Your notification deliveries, newest first",
    description:
      "Every message sent to you on every channel: kind, channel, target, status (`pending`, `delivered`, `failed`, `refused`), attempts, the last error, when the transition happened and when it was delivered.",
    request: { query: DeliveriesQuery },
    responses: { 200: json(NotificationDeliveryList, "Deliveries"), 401: error("No valid credential"), 422: error("Invalid query") },
  }),
  async (c) => {
    const { limit, kind } = c.req.valid("query");
    return c.json({ deliveries: await listDeliveries(c.get("db"), principalOf(c).user.id, limit, kind) }, 200);
  },
);

notificationsRoutes.openapi(
  createRoute({
    method: "get",
    path: "/api/admin/notifications/smtp",
    tags,
    summary: "SMTP settings for e-mail notifications (admin)",
    description: "Host, port, TLS mode, user, from; the password masked.",
    responses: { 200: json(SmtpSettings, "Settings"), 401: error("No valid credential"), 403: error("Not an admin") },
  }),
  async (c) => c.json(await readSmtp(c.get("db")), 200),
);

notificationsRoutes.openapi(
  createRoute({
    method: "put",
    path: "/api/admin/notifications/smtp",
    tags,
    summary: "Change the SMTP settings (admin)",
    description:
      "A password left out (or sent back as `********`) keeps the stored one. A host that is a local name or a loopback or private address is refused (422) unless private targets are allowed. Audited `smtp_settings_changed`.",
    request: jsonBody(SmtpSettingsUpdate),
    responses: {
      200: json(SmtpSettings, "Saved"),
      401: error("No valid credential"),
      403: error("Not an admin"),
      422: error("Invalid body, or a private host"),
    },
  }),
  async (c) => {
    const saved = await saveSmtp(c.get("db"), c.req.valid("json"));
    auditLater(c, { event_type: "smtp_settings_changed", target: "smtp", details: { host: saved.host, port: saved.port, tls: saved.tls } });
    return c.json(saved, 200);
  },
);

notificationsRoutes.openapi(
  createRoute({
    method: "post",
    path: "/api/admin/notifications/smtp/test",
    tags,
    summary: "Send a test e-mail (admin)",
    description: "Sends one message to `to` through the stored SMTP settings now and says whether the server took it, or why not.",
    request: jsonBody(SmtpTest),
    responses: {
      200: json(SmtpTestAnswer, "Sent, or the server's refusal"),
      401: error("No valid credential"),
      403: error("Not an admin"),
      422: error("Invalid body"),
    },
  }),
  async (c) => c.json(await testSmtp(c.get("db"), c.req.valid("json").to), 200),
);

const htmlPage = { description: "HTML page", content: { "text/html": { schema: z.string() } } };

const sendPage = (c: Context<AppEnv>, html: string, status: 200 | 403 | 404 | 409 | 410 | 422) =>
  c.html(html, status, { "Content-Security-Policy": APPROVAL_PAGE_CSP, "Cache-Control": "no-store" });

// An altered or unknown link names nothing: 404, as any address that is not there.
const refusalStatus = (why: string) => (why === "used" || why === "expired" ? 410 : why === "invalid" ? 404 : 403);

notificationsRoutes.openapi(
  createRoute({
    method: "get",
    path: "/api/notifications/approval/{token}",
    tags,
    summary: "An approval link's confirmation page",
    description:
      "The page an approval.needed message links to: the job and two buttons, approve and reject. Opening it changes nothing. A used or expired link: 410; an altered one: 404; one whose admin is no longer an admin: 403; each with a page that says so.",
    request: { params: ApprovalLinkParam },
    responses: { 200: htmlPage, 403: htmlPage, 404: htmlPage, 410: htmlPage },
  }),
  async (c) => {
    const view = await viewApprovalLink(c.get("db"), c.req.valid("param").token);
    if (typeof view === "string") return sendPage(c, refusedPage(view), refusalStatus(view));
    return sendPage(c, confirmationPage(view.job, view.admin.username), 200);
  },
);

notificationsRoutes.openapi(
  createRoute({
    method: "post",
    path: "/api/notifications/approval/{token}",
    tags,
    summary: "Decide a job's approval from its link",
    description:
      "The confirmation page's form: `decision=approve`, or `decision=reject` with a `reason`. Decides the link's own job, once, as the admin it was sent to (audited `job_approved` or `job_rejected` as them, `via: approval link`). A used or expired link: 410; altered: 404; its admin no longer one, or a post from another site: 403; a job no longer waiting for approval: 409 (the link is used).",
    request: {
      params: ApprovalLinkParam,
      body: { required: true, content: { "application/x-www-form-urlencoded": { schema: ApprovalLinkDecision } } },
    },
    responses: { 200: htmlPage, 403: htmlPage, 404: htmlPage, 409: htmlPage, 410: htmlPage, 422: htmlPage },
  }),
  async (c) => {
    const origin = c.req.header("origin");
    if (origin && origin !== "null" && origin !== new URL(c.req.url).origin)
      return sendPage(c, refusedPage("cross_site", "Decide from the link's own page."), 403);
    const { decision, reason } = c.req.valid("form");
    if (decision === "reject" && !reason)
      return sendPage(c, refusedPage("reason", "A rejection needs a reason: go back and give one."), 422);
    const request = { client_ip: c.get("clientIp") ?? null, user_agent: c.req.header("user-agent") ?? null };
    let outcome;
    try {
      outcome = await decideByLink(
        c.get("db"),
        c.req.valid("param").token,
        decision === "approve" ? { approve: true } : { approve: false, reason: reason! },
        request,
      );
    } catch (err) {
      if (err instanceof ApiError && err.status === 409) return sendPage(c, refusedPage("conflict", err.detail), 409);
      throw err;
    }
    if (typeof outcome === "string") return sendPage(c, refusedPage(outcome), refusalStatus(outcome));
    await applyEffects({ ...effectsOf(c, "approval link"), actor: outcome.actor }, outcome.change);
    return sendPage(c, decidedPage(outcome.view.link.jobId, decision === "approve" ? "approved" : "rejected"), 200);
  },
);
