/*
 * How objects of the storage endpoint are served so that none can run as the service's own
 * origin (README "Security in short"). A job writes whatever bytes it likes, HTML, SVG or
 * JavaScript included, and an admin reads them with their session on this origin: the browser
 * must neither sniff nor render them as a page with that session's rights.
 */

/**
 * Headers every object read carries, whoever reads it: no MIME sniffing, and a CSP sandbox with
 * nothing allowed, so even an HTML object opened in place runs no script in this origin.
 */
export const SAFE_OBJECT_HEADERS: Readonly<Record<string, string>> = {
  "x-content-type-options": "nosniff",
  "content-security-policy": "sandbox; default-src 'none'",
};

/**
 * The Content-Disposition of an object read by a user (session or API key): always a download
 * under the key's last segment, never shown inline in the service's origin.
 *
 * @example
 * attachmentDisposition("samples/step 10.html"); // `attachment; filename="step 10.html"; filename*=UTF-8''step%2010.html`
 */
export function attachmentDisposition(key: string): string {
  const name = key.slice(key.lastIndexOf("/") + 1) || "download";
  // The plain filename is ASCII without quotes or backslashes; filename* (RFC 6266) keeps the real one.
  const ascii = name.replace(/[^\x20-\x7e]|["\\]/g, "_");
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(name)}`;
}

/**
 * The headers of an object read: the safe ones always; for `reader` "user" a forced download;
 * for a signed S3 read the object's own Content-Disposition, if it was stored with one.
 *
 * @example
 * downloadHeaders("out/index.html", "user", undefined)["content-disposition"]; // "attachment; ..."
 */
export function downloadHeaders(key: string, reader: "user" | "signed", storedDisposition: string | undefined): Record<string, string> {
  const headers: Record<string, string> = { ...SAFE_OBJECT_HEADERS };
  if (reader === "user") headers["content-disposition"] = attachmentDisposition(key);
  else if (storedDisposition) headers["content-disposition"] = storedDisposition;
  return headers;
}
