/** How much of a request body one read takes when it is re-read in large chunks. */
export const LARGE_CHUNK_BYTES = 1024 * 1024;

type AtLeastReader = ReadableStreamBYOBReader & {
  readAtLeast?(minBytes: number, view: Uint8Array): Promise<ReadableStreamReadResult<Uint8Array>>;
};

/**
 * `body` re-read in chunks of `size` bytes (the last one shorter), through workerd's BYOB
 * `readAtLeast`. A request body read the default way arrives in pieces of about 4 KiB, and every
 * piece then costs a promise and a call in each check it passes through (signed hash, checksum,
 * aws-chunked decoding): measured, that per-piece cost, not the bytes, bounded uploads. One read
 * of 1 MiB costs the same as one of 4 KiB. Where `readAtLeast` is missing (not workerd) the body
 * is returned as it is.
 *
 * A failed read (the client went away, broken HTTP chunking) errors the stream with what
 * `readError` makes of it, so the caller can answer it as the client's fault.
 *
 * @example
 * const body = largeChunks(request.body!); // chunks of 1 MiB
 */
export function largeChunks(
  body: ReadableStream<Uint8Array>,
  size = LARGE_CHUNK_BYTES,
  readError: (error: unknown) => unknown = (error) => error,
): ReadableStream<Uint8Array> {
  let reader: AtLeastReader;
  try {
    reader = body.getReader({ mode: "byob" }) as AtLeastReader;
  } catch {
    return body; // not a byte stream
  }
  if (typeof reader.readAtLeast !== "function") {
    reader.releaseLock();
    return body;
  }
  const readAtLeast = reader.readAtLeast.bind(reader);
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      let read: ReadableStreamReadResult<Uint8Array>;
      try {
        read = await readAtLeast(size, new Uint8Array(size));
      } catch (error) {
        throw readError(error);
      }
      const { done, value } = read;
      if (value && value.byteLength > 0) controller.enqueue(value);
      if (done) controller.close();
    },
    cancel: (reason) => reader.cancel(reason),
  });
}
