/**
 * A request body as UTF-8 text, or null as soon as it passes `maxBytes` (the rest is not read,
 * so an oversized body is never held whole). One reader for every capped body: provider
 * webhooks and the storage endpoint's XML.
 *
 * @example
 * const text = await readLimitedText(request.body, 1024 * 1024);
 * if (text === null) throw new ApiError(413, "payload_too_large", "...");
 */
export async function readLimitedText(body: ReadableStream<Uint8Array> | null, maxBytes: number): Promise<string | null> {
  if (!body) return "";
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let text = "";
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return text + decoder.decode();
    size += value.byteLength;
    if (size > maxBytes) {
      await reader.cancel();
      return null;
    }
    text += decoder.decode(value, { stream: true });
  }
}
