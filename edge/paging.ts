import { z } from "@hono/zod-openapi";
import { ACTIVE_STATUSES, QUEUE_ORDERS } from "../shared/schemas/queue";
import { ApiError } from "./errors";

/*
 * The cursors of the long listings (GET /api/queue, /api/audit, /api/training/events,
 * /api/training/webhooks and /api/datasets): base64url of a small JSON object that names its
 * listing (`l`), the filters the walk was started with (`f`) and where the next page starts.
 * Clients treat them as opaque. The service never trusts one: it is decoded through its listing's
 * zod schema, so a malformed, truncated or edited cursor is 422 `invalid_cursor`, never a 500. A
 * cursor edited into another well-formed one is only another position in the same listing:
 * filters and access rules are applied to every page as to the first, so it reveals nothing the
 * caller could not list.
 */

const MAX_CURSOR_CHARS = 1024;
/** A dataset listing's cursor carries its path (up to 1024 characters) and the last name listed. */
const MAX_DATASETS_CURSOR_CHARS = 8192;

const LISTINGS = {
  queue: "GET /api/queue",
  audit: "GET /api/audit",
  events: "GET /api/training/events",
  deliveries: "GET /api/training/webhooks",
  datasets: "GET /api/datasets",
} as const;
export type Listing = keyof typeof LISTINGS;

const id = z.number().int().min(0);

/** Where a queue walk goes on: after this id (submission order) or after this entry's place in the scheduling order. */
const QueueKey = z.union([
  z.strictObject({ id }),
  z.strictObject({ rank: z.number().int().min(0).max(3), priority: z.number().int(), queued_at: z.string().max(64), id }),
]);
export type QueueKey = z.infer<typeof QueueKey>;

export type QueueOrder = (typeof QUEUE_ORDERS)[number];

const QueueCursor = z
  .strictObject({
    f: z.strictObject({
      order: z.enum(QUEUE_ORDERS),
      status: z.enum(ACTIVE_STATUSES).nullable(),
      include_completed: z.boolean(),
      // A username; cursors made before this filter existed carry none.
      user: z.string().min(1).max(254).nullable().default(null),
    }),
    k: QueueKey,
  })
  .refine((c) => "rank" in c.k === (c.f.order === "scheduling"), "its position does not fit its order");

const AuditCursor = z.strictObject({
  f: z.strictObject({
    event_type: z.string().max(64).nullable(),
    since: z.string().max(64).nullable(),
    until: z.string().max(64).nullable(),
  }),
  before_id: z.number().int().min(1),
});

const EventsCursor = z.strictObject({ job_id: z.string().min(1).max(200), index: id });
const DeliveriesCursor = z.strictObject({ job_id: z.string().min(1).max(200), after_id: id });
// `after`: the last entry of the page before, a file's name or a folder's name and "/".
const DatasetsCursor = z.strictObject({ path: z.string().max(1024), after: z.string().min(1).max(1024) });

const CURSORS = {
  queue: QueueCursor,
  audit: AuditCursor,
  events: EventsCursor,
  deliveries: DeliveriesCursor,
  datasets: DatasetsCursor,
} satisfies Record<Listing, z.ZodType>;
export type CursorOf<L extends Listing> = z.infer<(typeof CURSORS)[L]>;

function toBase64Url(text: string): string {
  let binary = "";
  for (const byte of new TextEncoder().encode(text)) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function fromBase64Url(text: string): string {
  const binary = atob(text.replace(/-/g, "+").replace(/_/g, "/"));
  return new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(Uint8Array.from(binary, (c) => c.charCodeAt(0)));
}

const invalid = (detail: string) => new ApiError(422, "invalid_cursor", detail);
const START_AGAIN = "pass the previous page's next_cursor unchanged, or leave cursor out to start from the first page";

/**
 * The cursor for the page after this one of `listing`.
 *
 * @example
 * encodeCursor("events", { job_id: "local-3f9c2a1b04de", index: 40 }); // "eyJsIjoiZXZlbnRzIiwi..."
 */
export function encodeCursor<L extends Listing>(listing: L, position: CursorOf<L>): string {
  return toBase64Url(JSON.stringify({ l: listing, ...position }));
}

/**
 * A cursor of `listing` read back; 422 `invalid_cursor` for anything this service did not make
 * for that listing (garbage, a truncated or edited cursor, another listing's cursor).
 *
 * @example
 * const { job_id, index } = decodeCursor("events", query.cursor);
 */
export function decodeCursor<L extends Listing>(listing: L, text: string): CursorOf<L> {
  if (text.length > (listing === "datasets" ? MAX_DATASETS_CURSOR_CHARS : MAX_CURSOR_CHARS) || !/^[A-Za-z0-9_-]+$/.test(text))
    throw invalid(`cursor is not a cursor of ${LISTINGS[listing]} (not base64url, or too long): ${START_AGAIN}`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(fromBase64Url(text));
  } catch {
    throw invalid(`cursor is not a cursor of ${LISTINGS[listing]} (unreadable): ${START_AGAIN}`);
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed))
    throw invalid(`cursor is not a cursor of ${LISTINGS[listing]}: ${START_AGAIN}`);
  const { l, ...position } = parsed as Record<string, unknown>;
  if (l !== listing) {
    const other = typeof l === "string" && l in LISTINGS ? LISTINGS[l as Listing] : null;
    throw invalid(
      other
        ? `cursor belongs to ${other}, not ${LISTINGS[listing]}: ${START_AGAIN}`
        : `cursor is not a cursor of ${LISTINGS[listing]}: ${START_AGAIN}`,
    );
  }
  const result = CURSORS[listing].safeParse(position);
  if (!result.success)
    throw invalid(`cursor of ${LISTINGS[listing]} has been altered (${result.error.issues[0]?.message ?? "bad fields"}): ${START_AGAIN}`);
  return result.data as CursorOf<L>;
}

type FilterValue = string | number | boolean | null;

/**
 * The filters of a page: those the cursor carries, so `?cursor=...` alone continues the walk it
 * came from. A filter sent with the cursor must equal the carried one (422 `invalid_cursor`
 * otherwise): changing filters mid-walk starts a different listing.
 *
 * @example
 * continueFilters({ status: "pending", include_completed: false }, { status: undefined, include_completed: undefined });
 * // { status: "pending", include_completed: false }
 */
export function continueFilters<F extends Record<string, FilterValue>>(carried: F, asked: { [K in keyof F]?: F[K] | undefined }): F {
  for (const key of Object.keys(carried) as (keyof F & string)[]) {
    const value = asked[key];
    if (value !== undefined && value !== carried[key]) {
      throw invalid(
        `cursor continues a walk with ${key}=${carried[key] ?? "(none)"}, but this request asks for ${key}=${value}: send the same ${key} as the first page, or leave cursor out to start a new walk`,
      );
    }
  }
  return carried;
}
