import { createRoute } from "@hono/zod-openapi";
import { AuditList, AuditQuery, AuditVerification } from "../../shared/schemas/audit";
import { listAudit, verifyAuditChain } from "../audit/trail";
import { createRouter } from "../router";
import { error, json } from "./openapi";

/** The audit trail, for admins: entries newest first, and a check of the whole hash chain. */
export const auditRoutes = createRouter();

const tags = ["Audit"];
const errors = { 401: error("No valid credential"), 403: error("Not an admin"), 422: error("Invalid query") };

auditRoutes.openapi(
  createRoute({
    method: "get",
    path: "/api/audit",
    tags,
    summary: "Audit entries, newest first (admin)",
    description: "Filter by `event_type` and time (`since`, `until`); page back with `before_id`.",
    request: { query: AuditQuery },
    responses: { 200: json(AuditList, "Entries"), ...errors },
  }),
  async (c) => {
    const query = c.req.valid("query");
    if (query.since && query.until && Date.parse(query.since) >= Date.parse(query.until)) {
      return c.json({ detail: "since must be earlier than until", code: "invalid_request" }, 422);
    }
    const entries = await listAudit(c.get("db"), {
      limit: query.limit,
      event_type: query.event_type,
      since: query.since && new Date(query.since).toISOString(),
      until: query.until && new Date(query.until).toISOString(),
      before_id: query.before_id,
    });
    const last = entries.at(-1);
    return c.json({ entries, next_before_id: entries.length === query.limit && last && last.id > 1 ? last.id : null }, 200);
  },
);

auditRoutes.openapi(
  createRoute({
    method: "get",
    path: "/api/audit/verify",
    tags,
    summary: "Check the audit trail's hash chain (admin)",
    description: "Recomputes every entry's hash from the first: an edited entry, a removed one or a broken link is reported with the first entry where the chain fails.",
    responses: { 200: json(AuditVerification, "The result"), 401: errors[401], 403: errors[403] },
  }),
  async (c) => c.json(await verifyAuditChain(c.get("db")), 200),
);
