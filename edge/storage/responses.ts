/** An S3 XML answer: the XML declaration, then `body`. */
export function xml(body: string, status = 200, headers: Record<string, string> = {}): Response {
  return new Response(`<?xml version="1.0" encoding="UTF-8"?>\n${body}`, {
    status,
    headers: { "content-type": "application/xml", ...headers },
  });
}

/** An ETag as S3 writes it, in double quotes. */
export const quote = (etag: string) => (etag.startsWith('"') ? etag : `"${etag}"`);
