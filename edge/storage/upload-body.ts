import { awsChunkedDecoder, awsChunkedOptions, isAwsChunked } from "./chunked";
import { checksumAlgorithmOfHeader, checksumTap, createChecksum, toBase64, type ChecksumAlgorithm } from "./checksums";
import { S3Error } from "./errors";
import { largeChunks } from "./large-chunks";
import { fixedLengthStream } from "../bucket";
import { payloadSha256Verifier, type chunkSigner } from "./sigv4";

/*
 * An upload's body on its way into R2: aws-chunked decoded, its signed hash and checksums checked
 * as it streams, and stored only whole (FixedLengthStream: R2 needs the length up front). Bodies
 * never sit in memory whole.
 */

/** How a request's body is signed: its x-amz-content-sha256 mode and hash, and the chunk signer of a streaming-signed body. */
export type Payload = { mode: string; hash: string; signer?: ReturnType<typeof chunkSigner> };

/**
 * The request body as a stream of the object's bytes: aws-chunked decoded, a signed hash checked.
 *
 * @example
 * const body = objectBody(request, payload); // then storeSized(body.stream, body.length, (sized) => bucket.put(key, sized))
 */
export function objectBody(request: Request, payload: Payload): { stream: ReadableStream<Uint8Array>; length: number } {
  if (!request.body) return { stream: new Blob([]).stream(), length: 0 };
  // A body that breaks off (the client went away, bad HTTP chunking) is the client's error.
  const body = largeChunks(
    request.body,
    undefined,
    (error) => new S3Error("IncompleteBody", `The request body ended before its declared length: ${String(error)}`),
  );
  if (isAwsChunked(request.headers)) {
    const options = awsChunkedOptions(request.headers);
    if (options instanceof S3Error) throw options;
    if (options.decodedContentLength === null || options.decodedContentLength === undefined)
      throw new S3Error("MissingContentLength", "aws-chunked uploads must send x-amz-decoded-content-length.");
    const decoded = body.pipeThrough(awsChunkedDecoder({ ...options, signer: payload.signer }));
    return { stream: decoded, length: options.decodedContentLength };
  }
  const declared = request.headers.get("content-length");
  if (declared === null) throw new S3Error("MissingContentLength", "You must provide the Content-Length HTTP header.");
  const length = Number(declared);
  let stream = payload.mode === "sha256" ? body.pipeThrough(payloadSha256Verifier(payload.hash)) : body;
  // A checksum header (the SDKs send one with a buffered body, x-amz-checksum-crc32 by default)
  // is checked too: over HTTPS the payload is usually UNSIGNED-PAYLOAD, and this is all that
  // guards the bytes.
  for (const [name, value] of request.headers) {
    const algorithm = checksumAlgorithmOfHeader(name);
    if (algorithm) stream = stream.pipeThrough(checksumVerifier(algorithm, name, value));
  }
  return { stream, length };
}

/** Passes a body through and errors it with BadDigest when its checksum is not `expected` (base64). */
function checksumVerifier(algorithm: ChecksumAlgorithm, header: string, expected: string): TransformStream<Uint8Array, Uint8Array> {
  return checksumTap(createChecksum(algorithm), (digest) => {
    if (toBase64(digest) !== expected.trim())
      throw new S3Error("BadDigest", `The ${header} you specified did not match the calculated checksum.`);
  });
}

/**
 * Passes chunks on one behind, and the last only once the stream before it has ended cleanly.
 * The checks on a body (its signed hash, its trailing checksum) can only fail at its very end;
 * by then R2 would have every byte it was promised and store the object. Held back, the last
 * chunk never arrives when the check fails, so R2 stores nothing.
 */
function holdLastChunk(): TransformStream<Uint8Array, Uint8Array> {
  let held: Uint8Array | null = null;
  return new TransformStream({
    transform(chunk, controller) {
      if (held) controller.enqueue(held);
      held = chunk;
    },
    flush(controller) {
      if (held) controller.enqueue(held);
    },
  });
}

/**
 * Stores `stream` of `length` bytes with `store` (R2 wants a stream of known length: a
 * FixedLengthStream). When the body is refused on the way (a checksum, a hash, its length), the
 * store fails, and the refusal, an S3Error, is what is thrown, not R2's report of the broken
 * stream.
 *
 * @example
 * const object = await storeSized(body.stream, body.length, (sized) => bucket.put(key, sized));
 */
export async function storeSized<T>(
  stream: ReadableStream<Uint8Array>,
  length: number,
  store: (body: ReadableStream<Uint8Array>) => Promise<T>,
): Promise<T> {
  const fixed = fixedLengthStream(length);
  let refusal: unknown = null;
  const piping = stream
    .pipeThrough(holdLastChunk())
    .pipeTo(fixed.writable)
    .catch((error: unknown) => {
      refusal = error;
    });
  try {
    const stored = await store(fixed.readable);
    await piping;
    if (refusal !== null) throw refusal;
    return stored;
  } catch (error) {
    await piping;
    if (refusal instanceof S3Error) throw refusal;
    if (refusal !== null && String(refusal).includes("FixedLengthStream"))
      throw new S3Error("IncompleteBody", `The body was not the ${length} bytes declared.`);
    throw error;
  }
}
