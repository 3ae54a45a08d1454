/*
 * Dataset paths: every name a user gives is confined to the datasets root. A path is
 * relative, "/"-separated, and each segment a plain name: no "..", ".", empty segments,
 * backslashes, control characters or leading "/". Refused, never "cleaned up": a cleaned path
 * would write somewhere the user did not name.
 */

export const MAX_PATH_LENGTH = 1024;
export const MAX_SEGMENT_LENGTH = 255;

/** Images plus the caption and metadata files a dataset may hold. */
export const ALLOWED_EXTENSIONS = [".png", ".jpg", ".jpeg", ".webp", ".bmp", ".gif", ".tif", ".tiff", ".txt", ".jsonl", ".csv"] as const;

/** The path's segments, or the reason it is refused. `allowEmpty`: "" means the root. */
export function checkPath(raw: string, allowEmpty = true): { segments: string[] } | { error: string } {
  if (raw === "" || raw === "/") return allowEmpty ? { segments: [] } : { error: "must not be empty" };
  if (raw.length > MAX_PATH_LENGTH) return { error: `is longer than ${MAX_PATH_LENGTH} characters` };
  if (raw.startsWith("/")) return { error: "must be relative to the datasets root (no leading /)" };
  if (raw.includes("\\")) return { error: "must use / between folders, not \\" };
  // eslint-disable-next-line no-control-regex
  if (/[\x00-\x1f\x7f]/.test(raw)) return { error: "must not contain control characters" };
  const segments = raw.replace(/\/$/, "").split("/");
  for (const s of segments) {
    if (s === "") return { error: "must not contain empty segments (//)" };
    if (s === "." || s === "..") return { error: `must not contain "${s}"` };
    if (s.length > MAX_SEGMENT_LENGTH) return { error: `has a segment longer than ${MAX_SEGMENT_LENGTH} characters` };
  }
  return { segments };
}

/** A file or folder name: one segment. */
export function checkName(raw: string): string | null {
  if (raw.includes("/")) return "must be a single name, without /";
  const checked = checkPath(raw, false);
  return "error" in checked ? checked.error : null;
}

export function hasAllowedExtension(name: string): boolean {
  const dot = name.lastIndexOf(".");
  return dot > 0 && (ALLOWED_EXTENSIONS as readonly string[]).includes(name.slice(dot).toLowerCase());
}

/** The R2 key of a dataset path (segments joined under the root prefix). */
export const DATASETS_PREFIX = "datasets/";
export const keyOf = (segments: string[]) => DATASETS_PREFIX + segments.join("/");

export function contentTypeOf(name: string): string {
  const ext = name.slice(name.lastIndexOf(".") + 1).toLowerCase();
  return (
    (
      {
        png: "image/png",
        jpg: "image/jpeg",
        jpeg: "image/jpeg",
        webp: "image/webp",
        bmp: "image/bmp",
        gif: "image/gif",
        tif: "image/tiff",
        tiff: "image/tiff",
        txt: "text/plain; charset=utf-8",
        jsonl: "application/jsonl",
        csv: "text/csv",
      } as Record<string, string>
    )[ext] ?? "application/octet-stream"
  );
}
