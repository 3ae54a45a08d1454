import { constantTimeEqual } from "../auth/crypto";
import { checksumAlgorithmOfHeader, createChecksum, toBase64, toHex, type ChecksumAlgorithm, type IncrementalChecksum } from "./checksums";
import { S3Error } from "./errors";

/**
 * Decoding of `Content-Encoding: aws-chunked` request bodies, which boto3 >= 1.36, the AWS CLI
 * and @aws-sdk/client-s3 send for uploads by default. Stored without decoding, an object would
 * contain the chunk framing. The framing, by x-amz-content-sha256:
 *
 *     STREAMING-UNSIGNED-PAYLOAD-TRAILER         <hex size>\r\n<data>\r\n ... 0\r\n<trailers>\r\n
 *     STREAMING-AWS4-HMAC-SHA256-PAYLOAD         <hex size>;chunk-signature=<sig>\r\n<data>\r\n ...
 *                                                0;chunk-signature=<sig>\r\n\r\n
 *     STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER as above, the last chunk followed by trailers
 *                                                and x-amz-trailer-signature:<sig>\r\n\r\n
 *
 * where trailers are lines such as `x-amz-checksum-crc32:<base64>\r\n`, named in advance by the
 * x-amz-trailer header. The decoder streams: it holds at most one framing line, never the body.
 * Chunk data is passed on as it arrives and its signature checked when the chunk ends, so a
 * forged chunk errors the stream (and with it the R2 put reading it) rather than being stored.
 */

/** Signs chunk strings with the request's signing key (sigv4.ts chunkSigner builds one). */
export interface ChunkSigner {
  /** The request's own signature: the previous signature of the first chunk. */
  seedSignature: string;
  amzDate: string;
  scope: string;
  /** Hex HMAC-SHA256 of `stringToSign` under the request's signing key. */
  sign(stringToSign: string): Promise<string>;
}

export interface AwsChunkedOptions {
  /** The request's x-amz-content-sha256: one of the three STREAMING-* markers above. */
  contentSha256: string;
  /** x-amz-decoded-content-length, when the client sent it: the decoded body must be exactly this long. */
  decodedContentLength?: number | null;
  /** The trailers the body must end with (x-amz-trailer), lower-case, e.g. ["x-amz-checksum-crc32"]. */
  trailers?: string[];
  /** Required for the signed variants. */
  signer?: ChunkSigner;
}

const EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
const MAX_LINE = 4096;
const MAX_TRAILER_BYTES = 16 * 1024;
const CR = 0x0d;
const LF = 0x0a;
const MODES = {
  "STREAMING-UNSIGNED-PAYLOAD-TRAILER": { signed: false, signedTrailer: false },
  "STREAMING-AWS4-HMAC-SHA256-PAYLOAD": { signed: true, signedTrailer: false },
  "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER": { signed: true, signedTrailer: true },
} as const;

/**
 * Whether a request's body is aws-chunked: S3 goes by x-amz-content-sha256, not Content-Encoding.
 *
 * @example
 * isAwsChunked(new Headers({ "x-amz-content-sha256": "STREAMING-UNSIGNED-PAYLOAD-TRAILER" })); // true
 */
export function isAwsChunked(headers: Headers): boolean {
  return (headers.get("x-amz-content-sha256") ?? "") in MODES;
}

/**
 * Reads the decoder's options from a request's headers: x-amz-content-sha256,
 * x-amz-decoded-content-length and x-amz-trailer. Also returns the Content-Encoding left once
 * aws-chunked is removed (what to store with the object), or null when none is left.
 *
 * @example
 * const options = awsChunkedOptions(request.headers);
 * if (options instanceof S3Error) return s3ErrorResponse(options, path, requestId);
 * const body = request.body!.pipeThrough(awsChunkedDecoder(options));
 */
export function awsChunkedOptions(headers: Headers): (AwsChunkedOptions & { contentEncoding: string | null }) | S3Error {
  const contentSha256 = headers.get("x-amz-content-sha256") ?? "";
  if (!(contentSha256 in MODES))
    return new S3Error("InvalidArgument", `x-amz-content-sha256 "${contentSha256}" is not an aws-chunked payload.`);
  const lengthHeader = headers.get("x-amz-decoded-content-length");
  if (lengthHeader !== null && !/^\d{1,15}$/.test(lengthHeader))
    return new S3Error("InvalidArgument", "x-amz-decoded-content-length must be a whole number of bytes.");
  const trailerHeader = headers.get("x-amz-trailer");
  const trailers =
    trailerHeader === null
      ? []
      : trailerHeader
          .split(",")
          .map((name) => name.trim().toLowerCase())
          .filter((name) => name !== "");
  for (const name of trailers) {
    if (!checksumAlgorithmOfHeader(name))
      return new S3Error("InvalidRequest", `The value specified in the x-amz-trailer header is not supported: ${name}`);
  }
  const remaining = (headers.get("content-encoding") ?? "")
    .split(",")
    .map((coding) => coding.trim())
    .filter((coding) => coding !== "" && coding.toLowerCase() !== "aws-chunked");
  return {
    contentSha256,
    decodedContentLength: lengthHeader === null ? null : Number(lengthHeader),
    trailers,
    contentEncoding: remaining.length ? remaining.join(", ") : null,
  };
}

type State = "size" | "data" | "data-end" | "trailer" | "done";

/**
 * A TransformStream from an aws-chunked body to the object's bytes. It errors with an S3Error:
 * IncompleteBody when the body ends mid-frame or is shorter than x-amz-decoded-content-length,
 * InvalidRequest for malformed framing or a body longer than declared, MalformedTrailerError for
 * a missing or unexpected trailer, BadDigest when a trailing checksum does not match, and
 * SignatureDoesNotMatch when a chunk or trailer signature does not.
 *
 * @example
 * await env.STORAGE.put(key, request.body!.pipeThrough(awsChunkedDecoder({ contentSha256, trailers: ["x-amz-checksum-crc32"] })));
 */
export function awsChunkedDecoder(options: AwsChunkedOptions): TransformStream<Uint8Array, Uint8Array> {
  const mode = MODES[options.contentSha256 as keyof typeof MODES];
  if (!mode) throw new S3Error("InvalidArgument", `x-amz-content-sha256 "${options.contentSha256}" is not an aws-chunked payload.`);
  if (mode.signed && !options.signer) throw new Error("awsChunkedDecoder: the signed aws-chunked variants need a signer");
  const declared = options.trailers ?? [];
  const checksums = new Map<string, { algorithm: ChecksumAlgorithm; hash: IncrementalChecksum }>();
  for (const name of declared) {
    const algorithm = checksumAlgorithmOfHeader(name);
    if (!algorithm) throw new S3Error("InvalidRequest", `The value specified in the x-amz-trailer header is not supported: ${name}`);
    checksums.set(name, { algorithm, hash: createChecksum(algorithm) });
  }
  const expectedLength = options.decodedContentLength ?? null;

  let state: State = "size";
  const line = new Uint8Array(MAX_LINE);
  let lineLength = 0;
  let remaining = 0; // data bytes left in the current chunk
  let crlfSeen = 0; // bytes of the \r\n after chunk data seen so far
  let decoded = 0;
  let chunkSignature = ""; // the signature the current chunk claims
  let chunkHash: IncrementalChecksum | null = null;
  let previousSignature = options.signer?.seedSignature ?? "";
  let trailerBytes = 0;
  const trailerLines: [string, string][] = [];
  const text = new TextDecoder();

  const malformed = (what: string) => new S3Error("InvalidRequest", `Malformed aws-chunked body: ${what}.`);

  async function checkChunkSignature(dataHashHex: string): Promise<void> {
    const signer = options.signer!;
    const stringToSign = ["AWS4-HMAC-SHA256-PAYLOAD", signer.amzDate, signer.scope, previousSignature, EMPTY_SHA256, dataHashHex].join(
      "\n",
    );
    const expected = await signer.sign(stringToSign);
    if (!constantTimeEqual(expected, chunkSignature))
      throw new S3Error(
        "SignatureDoesNotMatch",
        `The signature of chunk ${decoded === 0 ? "0" : `ending at byte ${decoded}`} does not match.`,
      );
    previousSignature = expected;
  }

  async function onSizeLine(content: string): Promise<void> {
    const m = /^([0-9a-fA-F]{1,12})(;.*)?$/.exec(content);
    if (!m) throw malformed(`"${content.slice(0, 40)}" is not a chunk size line`);
    const size = parseInt(m[1]!, 16);
    if (mode.signed) {
      const sig = /^;chunk-signature=([0-9a-f]{64})$/.exec(m[2] ?? "");
      if (!sig) throw malformed("a chunk of a signed payload lacks its chunk-signature");
      chunkSignature = sig[1]!;
      chunkHash = createChecksum("sha256");
    }
    if (expectedLength !== null && decoded + size > expectedLength) {
      throw new S3Error("InvalidRequest", `The decoded body is longer than x-amz-decoded-content-length (${expectedLength} bytes).`);
    }
    if (size === 0) {
      if (mode.signed) await checkChunkSignature(EMPTY_SHA256);
      state = "trailer";
    } else {
      remaining = size;
      state = "data";
    }
  }

  async function onDataEnd(): Promise<void> {
    if (mode.signed) await checkChunkSignature(toHex(chunkHash!.digest()));
    state = "size";
  }

  function onTrailerLine(content: string): void {
    if (content === "") {
      state = "done";
      return;
    }
    const colon = content.indexOf(":");
    if (colon <= 0) throw new S3Error("MalformedTrailerError", `The trailer line "${content.slice(0, 60)}" is not "name:value".`);
    trailerLines.push([content.slice(0, colon).trim().toLowerCase(), content.slice(colon + 1).trim()]);
  }

  async function finish(): Promise<void> {
    if (expectedLength !== null && decoded !== expectedLength) {
      throw new S3Error("IncompleteBody", `The decoded body has ${decoded} bytes; x-amz-decoded-content-length says ${expectedLength}.`);
    }
    const seen = new Map<string, string>();
    let trailerSignature: string | null = null;
    for (const [name, value] of trailerLines) {
      if (seen.has(name) || (name === "x-amz-trailer-signature" && trailerSignature !== null))
        throw new S3Error("MalformedTrailerError", `The trailer ${name} is given twice.`);
      if (name === "x-amz-trailer-signature" && mode.signedTrailer) trailerSignature = value;
      else if (!checksums.has(name)) throw new S3Error("MalformedTrailerError", `The trailer ${name} was not announced in x-amz-trailer.`);
      else seen.set(name, value);
    }
    for (const name of checksums.keys()) {
      if (!seen.has(name)) throw new S3Error("MalformedTrailerError", `The body lacks the trailer ${name} announced in x-amz-trailer.`);
    }
    if (mode.signedTrailer) {
      if (trailerSignature === null) throw new S3Error("MalformedTrailerError", "The body lacks its x-amz-trailer-signature.");
      const signer = options.signer!;
      // The trailers are signed as "name:value\n" lines, in the order sent, signature excluded.
      const canonical = trailerLines
        .filter(([name]) => name !== "x-amz-trailer-signature")
        .map(([name, value]) => `${name}:${value}\n`)
        .join("");
      const hash = createChecksum("sha256");
      hash.update(new TextEncoder().encode(canonical));
      const expected = await signer.sign(
        ["AWS4-HMAC-SHA256-TRAILER", signer.amzDate, signer.scope, previousSignature, toHex(hash.digest())].join("\n"),
      );
      if (!constantTimeEqual(expected, trailerSignature))
        throw new S3Error("SignatureDoesNotMatch", "The trailer signature does not match.");
    }
    for (const [name, { algorithm, hash }] of checksums) {
      if (!constantTimeEqual(toBase64(hash.digest()), seen.get(name)!)) {
        throw new S3Error("BadDigest", `The ${algorithm.toUpperCase()} you specified did not match the calculated checksum.`);
      }
    }
  }

  return new TransformStream<Uint8Array, Uint8Array>({
    async transform(bytes, controller) {
      let i = 0;
      while (i < bytes.length) {
        if (state === "data") {
          const end = Math.min(bytes.length, i + remaining);
          const data = bytes.subarray(i, end);
          chunkHash?.update(data);
          for (const { hash } of checksums.values()) hash.update(data);
          decoded += data.length;
          remaining -= data.length;
          controller.enqueue(data);
          i = end;
          if (remaining === 0) {
            state = "data-end";
            crlfSeen = 0;
          }
        } else if (state === "data-end") {
          if (bytes[i] !== (crlfSeen === 0 ? CR : LF))
            throw malformed("chunk data is not followed by \\r\\n (does the chunk size match its data?)");
          i++;
          if (++crlfSeen === 2) await onDataEnd();
        } else if (state === "done") {
          throw malformed("bytes follow the end of the body");
        } else {
          // A framing line: chunk size or trailer. Lines end in \r\n; a bare \n is taken too.
          const lf = bytes.indexOf(LF, i);
          const end = lf < 0 ? bytes.length : lf;
          if (lineLength + (end - i) > MAX_LINE) throw malformed(`a framing line is longer than ${MAX_LINE} bytes`);
          line.set(bytes.subarray(i, end), lineLength);
          lineLength += end - i;
          if (state === "trailer" && (trailerBytes += end - i + (lf < 0 ? 0 : 1)) > MAX_TRAILER_BYTES)
            throw new S3Error("MalformedTrailerError", `The trailers exceed ${MAX_TRAILER_BYTES} bytes.`);
          i = end;
          if (lf < 0) break;
          i++; // the \n
          const length = lineLength > 0 && line[lineLength - 1] === CR ? lineLength - 1 : lineLength;
          const content = text.decode(line.subarray(0, length));
          lineLength = 0;
          if (state === "size") await onSizeLine(content);
          else onTrailerLine(content);
        }
      }
    },
    async flush() {
      // The SDK v3 ends a body without checksum with "0\r\n" alone: no trailer section at all.
      const bareEnd = state === "trailer" && trailerLines.length === 0 && lineLength === 0 && checksums.size === 0 && !mode.signedTrailer;
      if (state !== "done" && !bareEnd) throw new S3Error("IncompleteBody", "The request body ended before its aws-chunked framing did.");
      await finish();
    },
  });
}
