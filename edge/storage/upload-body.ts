import { awsChunkedDecoder, awsChunkedOptions, isAwsChunked } from "./chunked";
import { checksumAlgorithmOfHeader, checksumHeaderCheck, type BodyCheck } from "./checksums";
import { S3Error } from "./errors";
import { largeChunkReader, largeChunks, type ChunkReader } from "./large-chunks";
import { fixedLengthStream } from "../bucket";
import { payloadSha256Check, type chunkSigner } from "./sigv4";

/*
 * An upload's body on its way into R2: aws-chunked decoded, its signed hash and checksums checked
 * as it streams, and stored only whole (FixedLengthStream: R2 needs the length up front). Bodies
 * never sit in memory whole.
 *
 * The checks are not a chain of TransformStreams: one loop reads the body in 1 MiB chunks, feeds
 * each chunk to every check's hasher (synchronous, native) and writes it on; adding a check adds
 * no stream, queue or promise per chunk. What an upload costs the Worker's thread, measured
 * (bench:storage, README "Performance"): the hashes (a part's MD5 most, then the signed SHA-256)
 * and this one pass of the bytes through JavaScript, which a body refused at its end needs: R2
 * must never get its last bytes before the checks pass.
 */

/** How a request's body is signed: its x-amz-content-sha256 mode and hash, and the chunk signer of a streaming-signed body. */
export type Payload = { mode: string; hash: string; signer?: ReturnType<typeof chunkSigner> };

/** An upload's body: its bytes (`length` of them, decoded), and the checks they must pass. */
export interface UploadBody {
  chunks: ChunkReader;
  length: number;
  /** Run over every byte; a check that throws refuses the body before its last bytes are stored. */
  checks: BodyCheck[];
}

/** A body that breaks off (the client went away, bad HTTP chunking) is the client's error. */
const incomplete = (error: unknown) => new S3Error("IncompleteBody", `The request body ended before its declared length: ${String(error)}`);

/**
 * The request body as the object's bytes with the checks they must pass: aws-chunked decoded (its
 * chunk signatures and trailing checksums checked by the decoder), else its signed SHA-256 and any
 * x-amz-checksum-* header. Add checks of your own (a part's MD5) before storing it.
 *
 * @example
 * const body = objectBody(request, payload); // then storeSized(body, (sized) => bucket.put(key, sized))
 */
export function objectBody(request: Request, payload: Payload): UploadBody {
  if (!request.body) return { chunks: { read: async () => null, cancel: async () => {} }, length: 0, checks: [] };
  if (isAwsChunked(request.headers)) {
    const options = awsChunkedOptions(request.headers);
    if (options instanceof S3Error) throw options;
    if (options.decodedContentLength === null || options.decodedContentLength === undefined)
      throw new S3Error("MissingContentLength", "aws-chunked uploads must send x-amz-decoded-content-length.");
    const decoded = largeChunks(request.body, undefined, incomplete).pipeThrough(awsChunkedDecoder({ ...options, signer: payload.signer }));
    return { chunks: largeChunkReader(decoded), length: options.decodedContentLength, checks: [] };
  }
  const declared = request.headers.get("content-length");
  if (declared === null) throw new S3Error("MissingContentLength", "You must provide the Content-Length HTTP header.");
  const checks: BodyCheck[] = payload.mode === "sha256" ? [payloadSha256Check(payload.hash)] : [];
  // A checksum header (the SDKs send one with a buffered body, x-amz-checksum-crc32 by default)
  // is checked too: over HTTPS the payload is usually UNSIGNED-PAYLOAD, and this is all that
  // guards the bytes.
  for (const [name, value] of request.headers) {
    const algorithm = checksumAlgorithmOfHeader(name);
    if (algorithm) checks.push(checksumHeaderCheck(algorithm, name, value));
  }
  return { chunks: largeChunkReader(request.body, undefined, incomplete), length: Number(declared), checks };
}

/**
 * Stores `body` with `store` (R2 wants a stream of known length: a FixedLengthStream). Every
 * chunk is hashed by the body's checks before it is handed on, and the last chunk is held back
 * until the checks have passed: they can only fail at the very end, and by then R2 would have
 * every byte it was promised and store the object. Held back, the last chunk never arrives when a
 * check fails, so R2 stores nothing. When the body is refused on the way (a check, its length),
 * the refusal, an S3Error, is what is thrown, not R2's report of the broken stream.
 *
 * @example
 * const object = await storeSized(objectBody(request, payload), (sized) => bucket.put(key, sized));
 */
export async function storeSized<T>(body: UploadBody, store: (sized: ReadableStream<Uint8Array>) => Promise<T>): Promise<T> {
  const fixed = fixedLengthStream(body.length);
  const writer = fixed.writable.getWriter();
  let refusal: unknown = null;
  const pumping = pump(body, writer).catch(async (error: unknown) => {
    refusal = error;
    await Promise.allSettled([writer.abort(error), body.chunks.cancel(error)]);
  });
  try {
    const stored = await store(fixed.readable);
    await pumping;
    if (refusal !== null) throw refusal;
    return stored;
  } catch (error) {
    await pumping;
    if (refusal instanceof S3Error) throw refusal;
    if (refusal !== null && String(refusal).includes("FixedLengthStream"))
      throw new S3Error("IncompleteBody", `The body was not the ${body.length} bytes declared.`);
    throw error;
  }
}

/**
 * Reads `body` into `writer`: each chunk hashed as it is read, written while the next is read (one
 * write in flight), the last one written only once every check has passed.
 */
async function pump({ chunks, checks }: UploadBody, writer: WritableStreamDefaultWriter<Uint8Array>): Promise<void> {
  let held: Uint8Array | null = null;
  let writing: Promise<void> = Promise.resolve();
  for (let chunk = await chunks.read(); chunk; chunk = await chunks.read()) {
    // Hashed before it is handed on: the writable may take (detach) the buffer.
    for (const check of checks) check.checksum.update(chunk);
    if (held) {
      await writing;
      writing = writer.write(held);
      writing.catch(() => {}); // awaited on the next turn; not unhandled meanwhile
    }
    held = chunk;
  }
  await writing;
  for (const check of checks) check.done(check.checksum.digest());
  if (held) await writer.write(held);
  await writer.close();
}
