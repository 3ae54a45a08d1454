import { createRoute } from "@hono/zod-openapi";
import { AuditList, AuditQuery, AuditVerification } from "../../shared/schemas/audit";
import { listAudit, verifyAuditChain } from "../audit/trail";
import { ApiError } from "../errors";
import { continueFilters, decodeCursor, encodeCursor } from "../paging";
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
    description:
      "Filter by `event_type` and time (`since`, `until`). Pages go back in time: pass `next_cursor` as `cursor` (it keeps the first page's filters: send none, or the same), or `next_before_id` as `before_id` (send the filters again). Both are null on the last page. Entries written while you page are newer than your first page: they never shift the pages you walk.",
    request: { query: AuditQuery },
    responses: { 200: json(AuditList, "Entries"), ...errors, 422: error("Invalid query or cursor (`invalid_cursor`)") },
  }),
  async (c) => {
    const query = c.req.valid("query");
    if (query.cursor !== undefined && query.before_id !== undefined)
      throw new ApiError(422, "invalid_cursor", "send cursor or before_id, not both: the cursor already says where the page starts");
    const cursor = query.cursor === undefined ? null : decodeCursor("audit", query.cursor);
    const asked = {
      event_type: query.event_type,
      since: query.since && new Date(query.since).toISOString(),
      until: query.until && new Date(query.until).toISOString(),
    };
    const f = cursor
      ? continueFilters(cursor.f, asked)
      : { event_type: asked.event_type ?? null, since: asked.since ?? null, until: asked.until ?? null };
    if (f.since && f.until && Date.parse(f.since) >= Date.parse(f.until)) {
      return c.json({ detail: "since must be earlier than until", code: "invalid_request" }, 422);
    }
    const { entries, more } = await listAudit(c.get("db"), {
      limit: query.limit,
      event_type: f.event_type ?? undefined,
      since: f.since ?? undefined,
      until: f.until ?? undefined,
      before_id: cursor?.before_id ?? query.before_id,
    });
    const last = more ? entries.at(-1) : undefined;
    return c.json(
      { entries, next_before_id: last ? last.id : null, next_cursor: last ? encodeCursor("audit", { f, before_id: last.id }) : null },
      200,
    );
  },
);

auditRoutes.openapi(
  createRoute({
    method: "get",
    path: "/api/audit/verify",
    tags,
    summary: "Check the audit trail's hash chain (admin)",
    description:
      "Recomputes every entry's hash from the first: an edited entry, a removed one or a broken link is reported with the first entry where the chain fails.",
    responses: { 200: json(AuditVerification, "The result"), 401: errors[401], 403: errors[403] },
  }),
  async (c) => c.json(await verifyAuditChain(c.get("db")), 200),
);
