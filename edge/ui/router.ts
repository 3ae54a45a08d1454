import { signal } from "@preact/signals";

/**
 * The page's location, kept in the URL fragment (`/#/jobs/local-1?tab=events`) so `/` is the
 * only page the Worker serves and every view can be bookmarked and reloaded.
 */
export interface Route {
  /** Path segments: `#/jobs/local-1` is ["jobs", "local-1"]; `#/` is []. */
  parts: string[];
  query: URLSearchParams;
}

function parse(hash: string): Route {
  const [path = "", search = ""] = hash.replace(/^#/, "").split("?", 2);
  return { parts: path.split("/").filter(Boolean).map(decodeURIComponent), query: new URLSearchParams(search) };
}

export const route = signal<Route>(parse(location.hash));

addEventListener("hashchange", () => {
  route.value = parse(location.hash);
});

/**
 * A link's href for a view.
 *
 * @example
 * href("jobs", "local-1"); // "#/jobs/local-1"
 * href("queue", { status: "pending" }); // "#/queue?status=pending"
 */
export function href(...parts: (string | Record<string, string | undefined>)[]): string {
  const segments = parts.filter((p): p is string => typeof p === "string").map(encodeURIComponent);
  const query = parts.find((p): p is Record<string, string | undefined> => typeof p === "object");
  const search = new URLSearchParams();
  for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined && v !== "") search.set(k, v);
  const qs = search.toString();
  return `#/${segments.join("/")}${qs ? `?${qs}` : ""}`;
}

/** Goes to a view (as a link would). */
export function navigate(to: string): void {
  location.hash = to.replace(/^#/, "");
}

/** Replaces the current location's query without a new history entry (a filter change). */
export function replaceQuery(query: Record<string, string | undefined>): void {
  const next = href(...route.value.parts, query);
  history.replaceState(null, "", next);
  route.value = parse(next);
}
