/** How much of a request body one read takes when it is re-read in large chunks. */
export const LARGE_CHUNK_BYTES = 1024 * 1024;

type AtLeastReader = ReadableStreamBYOBReader & {
  readAtLeast?(minBytes: number, view: Uint8Array): Promise<ReadableStreamReadResult<Uint8Array>>;
};

/** Reads a body chunk by chunk: `read` gives null at its end. */
export interface ChunkReader {
  read(): Promise<Uint8Array | null>;
  cancel(reason?: unknown): Promise<void>;
}

/**
 * Reads `body` in chunks of `size` bytes (the last one shorter) through workerd's BYOB
 * `readAtLeast`. A request body read the default way arrives in pieces of about 4 KiB, and every
 * piece then costs a promise and a call in each check it passes through (signed hash, checksum,
 * aws-chunked decoding): measured, that per-piece cost, not the bytes, bounded uploads. One read
 * of 1 MiB costs the same as one of 4 KiB. Where `readAtLeast` is missing (not workerd, or not a
 * byte stream) the body is read as it comes.
 *
 * A failed read (the client went away, broken HTTP chunking) is thrown as what `readError` makes
 * of it, so the caller can answer it as the client's fault.
 *
 * @example
 * const reader = largeChunkReader(request.body!);
 * for (let chunk = await reader.read(); chunk; chunk = await reader.read()) hash.update(chunk);
 */
export function largeChunkReader(
  body: ReadableStream<Uint8Array>,
  size = LARGE_CHUNK_BYTES,
  readError: (error: unknown) => unknown = (error) => error,
): ChunkReader {
  let byob: AtLeastReader | null = null;
  try {
    byob = body.getReader({ mode: "byob" }) as AtLeastReader;
  } catch {
    // not a byte stream
  }
  if (byob && typeof byob.readAtLeast !== "function") {
    byob.releaseLock();
    byob = null;
  }
  if (!byob) {
    const plain = body.getReader();
    return {
      async read() {
        try {
          for (;;) {
            const { done, value } = await plain.read();
            if (done) return null;
            if (value.byteLength > 0) return value;
          }
        } catch (error) {
          throw readError(error);
        }
      },
      cancel: (reason) => plain.cancel(reason),
    };
  }
  const readAtLeast = byob.readAtLeast!.bind(byob);
  let ended = false;
  return {
    async read() {
      while (!ended) {
        let read: ReadableStreamReadResult<Uint8Array>;
        try {
          read = await readAtLeast(size, new Uint8Array(size));
        } catch (error) {
          throw readError(error);
        }
        if (read.done) ended = true;
        if (read.value && read.value.byteLength > 0) return read.value;
      }
      return null;
    },
    cancel: (reason) => byob.cancel(reason),
  };
}

/**
 * largeChunkReader as a stream (for what pipes it on, the aws-chunked decoder).
 *
 * @example
 * const body = largeChunks(request.body!); // chunks of 1 MiB
 */
export function largeChunks(
  body: ReadableStream<Uint8Array>,
  size = LARGE_CHUNK_BYTES,
  readError: (error: unknown) => unknown = (error) => error,
): ReadableStream<Uint8Array> {
  const reader = largeChunkReader(body, size, readError);
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const chunk = await reader.read();
      if (chunk) controller.enqueue(chunk);
      else controller.close();
    },
    cancel: (reason) => reader.cancel(reason),
  });
}
