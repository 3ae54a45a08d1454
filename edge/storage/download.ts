import { fixedLengthStream, type StorageBucket, type StoredObject } from "../bucket";
import { S3Error } from "./errors";
import { quote } from "./responses";

/** The headers of an object read (GetObject, HeadObject) that describe the object itself. */
export function objectHeaders(object: StoredObject): Record<string, string> {
  const headers: Record<string, string> = {
    etag: quote(object.etag),
    "last-modified": object.uploaded.toUTCString(),
    "accept-ranges": "bytes",
  };
  if (object.httpMetadata?.contentType) headers["content-type"] = object.httpMetadata.contentType;
  return headers;
}

/** How much of an object one R2 read covers when a download is served as successive reads. */
export const READ_STEP_BYTES = 16 * 1024 * 1024;

/**
 * An object's bytes `span` as successive ranged R2 reads of READ_STEP_BYTES, each piped into the
 * response by workerd itself (pipeTo between its own streams moves the bytes without a JavaScript
 * call per piece) and only as fast as the client takes them. Memory stays at about one step
 * whatever the object's size: the local R2 buffers a whole multipart object served as one read
 * (measured: workerd grew by the object's size). Every read must still match `etag`, so an object
 * replaced mid-download ends the response early rather than mixing two versions.
 *
 * @example
 * new Response(rangedBody(bucket, key, head.etag, { offset: 0, length: head.size }));
 */
export function rangedBody(
  bucket: StorageBucket,
  key: string,
  etag: string,
  span: { offset: number; length: number },
): ReadableStream<Uint8Array> {
  const { readable, writable } = fixedLengthStream(span.length);
  const end = span.offset + span.length;
  const pump = async () => {
    for (let at = span.offset; at < end; at += READ_STEP_BYTES) {
      const length = Math.min(READ_STEP_BYTES, end - at);
      const part = await bucket.get(key, { range: { offset: at, length }, onlyIf: { etagMatches: etag } });
      if (!part || !("body" in part)) throw new Error(`${key} changed or vanished during the download`);
      await part.body.pipeTo(writable, { preventClose: true });
    }
    await writable.close();
  };
  // A client that goes away errors the pipe; either way the response then ends short of its length.
  pump().catch((error: unknown) => writable.abort(error).catch(() => {}));
  return readable;
}

/**
 * A `Range: bytes=a-b` header as R2's range, or null for none; throws InvalidRange for one S3 would refuse.
 *
 * @example
 * parseRange("bytes=-10", 100); // { offset: 90, length: 10 }
 */
export function parseRange(header: string | null, size: number): { offset: number; length: number } | null {
  if (!header) return null;
  const match = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!match || (match[1] === "" && match[2] === "")) return null; // S3 ignores a range it cannot parse
  let start: number;
  let end: number;
  if (match[1] === "") {
    const suffix = Number(match[2]);
    start = Math.max(0, size - suffix);
    end = size - 1;
  } else {
    start = Number(match[1]);
    end = match[2] === "" ? size - 1 : Math.min(Number(match[2]), size - 1);
  }
  if (start >= size || end < start) throw new S3Error("InvalidRange", "The requested range is not satisfiable");
  return { offset: start, length: end - start + 1 };
}
