import { Sha256 } from "@aws-crypto/sha256-js";
import { ALGORITHM_IDENTIFIER, getCanonicalHeaders, SignatureV4 } from "@smithy/signature-v4";
import { constantTimeEqual } from "../auth/crypto";
import type { ChunkSigner } from "./chunked";
import { createChecksum, toHex, type BodyCheck } from "./checksums";
import { S3Error, type S3AuthError } from "./errors";

/**
 * AWS Signature Version 4 as S3 checks it, for requests signed by stock S3 clients (boto3, the
 * AWS CLI, @aws-sdk/client-s3): in the Authorization header or in the query string (presigned).
 *
 * Two steps so the caller can look the secret up in between:
 *
 *     const parsed = parseSigV4(request);            // S3AuthError when malformed or absent
 *     const secret = await lookUp(parsed.accessKeyId); // the caller answers InvalidAccessKeyId
 *     const error = await verifySigV4(request, parsed, secret, new Date());
 *
 * The canonical request, string to sign and signing key come from @smithy/signature-v4, the
 * signer the AWS SDK itself uses, so the encoding rules are the ones clients sign with. Only
 * what the library decides differently from S3 is done here: which headers are signed (the
 * library drops `date` and re-stamps `x-amz-date`, S3 uses exactly the SignedHeaders list), the
 * canonical URI (see canonicalUri), and the query (parsed here so `+` stays a plus).
 */

/** What the body is bound to, from `x-amz-content-sha256` (presigned: always unsigned). */
export type PayloadMode =
  /** A hex SHA-256 of the body: check it with payloadSha256Check (upload-body.ts does). */
  | "sha256"
  | "unsigned"
  /** aws-chunked without chunk signatures, checksum in a trailer: boto3 >= 1.36, SDK v3. */
  | "streaming-unsigned-trailer"
  /** aws-chunked with a signature per chunk (chunked.ts checks them with chunkSigner). */
  | "streaming-signed"
  | "streaming-signed-trailer";

export interface ParsedAuth {
  kind: "header" | "presigned";
  accessKeyId: string;
  /** The request's signing time as sent, `yyyyMMddTHHmmssZ`. */
  amzDate: string;
  signingDate: Date;
  region: string;
  service: string;
  /** `yyyyMMdd/region/service/aws4_request`. */
  scope: string;
  /** Lower-case header names, as listed by the client. */
  signedHeaders: string[];
  signature: string;
  /** The last line of the canonical request: a hex hash or one of the UNSIGNED/STREAMING markers. */
  payloadHash: string;
  payloadMode: PayloadMode;
  /** X-Amz-Expires of a presigned request, else null. */
  expiresSeconds: number | null;
}

/** S3 refuses header-signed requests whose x-amz-date is further than this from its clock. */
export const MAX_CLOCK_SKEW_MS = 15 * 60 * 1000;
/** A presigned URL lives at most a week (S3's limit on X-Amz-Expires). */
export const MAX_PRESIGNED_EXPIRES_S = 7 * 24 * 60 * 60;

const PAYLOAD_MARKERS: Record<string, PayloadMode> = {
  "UNSIGNED-PAYLOAD": "unsigned",
  "STREAMING-UNSIGNED-PAYLOAD-TRAILER": "streaming-unsigned-trailer",
  "STREAMING-AWS4-HMAC-SHA256-PAYLOAD": "streaming-signed",
  "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER": "streaming-signed-trailer",
};

const AMZ_DATE = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/;
const HEADER_NAME = /^[a-z0-9!#$%&'*+.^_`|~-]+$/;
const SIGNATURE = /^[0-9a-f]{64}$/;
const PRESIGN_PARAMS = [
  "X-Amz-Algorithm",
  "X-Amz-Credential",
  "X-Amz-Date",
  "X-Amz-Expires",
  "X-Amz-SignedHeaders",
  "X-Amz-Signature",
] as const;

function authError(code: S3AuthError["code"], message: string): S3AuthError {
  return new S3Error(code, message) as S3AuthError;
}

const MALFORMED_CREDENTIAL = 'the Credential is mal-formed; expecting "<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request".';

/**
 * Reads the SigV4 fields of `request` without checking the signature. Returns an S3AuthError
 * when there is no signature (AccessDenied, as S3 answers anonymous requests to a private
 * bucket), an unsupported mechanism, or malformed fields.
 *
 * @example
 * const parsed = parseSigV4(request);
 * if (parsed instanceof S3Error) return s3ErrorResponse(parsed, path, requestId);
 */
export function parseSigV4(request: Request): ParsedAuth | S3AuthError {
  const url = new URL(request.url);
  const query = parseQuery(url.search);
  if (!query) return authError("InvalidArgument", "The query string is not valid percent-encoding.");
  const authorization = request.headers.get("authorization");
  const presigned = query.some(([key]) => key === "X-Amz-Algorithm" || key === "X-Amz-Signature" || key === "X-Amz-Credential");
  if (authorization !== null && presigned) {
    return authError(
      "InvalidArgument",
      "Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter or the Authorization header should be specified.",
    );
  }
  if (presigned) return parsePresigned(query);
  if (authorization !== null) return parseAuthorizationHeader(authorization, request.headers);
  if (query.some(([key]) => key === "AWSAccessKeyId" || key === "Signature")) return unsupportedMechanism();
  return authError("AccessDenied", "Access Denied");
}

function unsupportedMechanism(): S3AuthError {
  return authError("InvalidRequest", "The authorization mechanism you have provided is not supported. Please use AWS4-HMAC-SHA256.");
}

function parseAuthorizationHeader(authorization: string, headers: Headers): ParsedAuth | S3AuthError {
  const match = /^AWS4-HMAC-SHA256\s+(.*)$/s.exec(authorization.trim());
  if (!match) return unsupportedMechanism();
  const fields = new Map<string, string>();
  for (const part of match[1]!.split(",")) {
    const field = /^\s*(Credential|SignedHeaders|Signature)=([^\s]*)\s*$/.exec(part);
    if (!field || fields.has(field[1]!))
      return authError("AuthorizationHeaderMalformed", `The authorization header is malformed; could not parse "${part.trim()}".`);
    fields.set(field[1]!, field[2]!);
  }
  const credential = fields.get("Credential");
  const signedHeaders = fields.get("SignedHeaders");
  const signature = fields.get("Signature");
  if (credential === undefined || signedHeaders === undefined || signature === undefined) {
    return authError(
      "AuthorizationHeaderMalformed",
      "The authorization header is malformed; it needs Credential, SignedHeaders and Signature.",
    );
  }
  const amzDate = headers.get("x-amz-date");
  const signingDate = amzDate === null ? null : parseAmzDate(amzDate);
  if (amzDate === null || signingDate === null)
    return authError("AccessDenied", "AWS authentication requires a valid Date or x-amz-date header");
  const contentSha256 = headers.get("x-amz-content-sha256");
  if (contentSha256 === null) return authError("InvalidRequest", "Missing required header for this request: x-amz-content-sha256");
  const payloadMode = payloadModeOf(contentSha256);
  if (payloadMode === null) {
    return authError(
      "InvalidArgument",
      "x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-UNSIGNED-PAYLOAD-TRAILER, STREAMING-AWS4-HMAC-SHA256-PAYLOAD(-TRAILER) or a lower-case hex SHA-256.",
    );
  }
  return assemble("header", "AuthorizationHeaderMalformed", {
    credential,
    signedHeaders,
    signature,
    amzDate,
    signingDate,
    payloadHash: contentSha256,
    payloadMode,
    expiresSeconds: null,
  });
}

function parsePresigned(query: [string, string][]): ParsedAuth | S3AuthError {
  const params = new Map<string, string>();
  for (const [key, value] of query) {
    if (!(PRESIGN_PARAMS as readonly string[]).includes(key)) continue;
    if (params.has(key)) return authError("AuthorizationQueryParametersError", `${key} is given more than once.`);
    params.set(key, value);
  }
  if (PRESIGN_PARAMS.some((name) => !params.has(name))) {
    return authError(
      "AuthorizationQueryParametersError",
      "Query-string authentication version 4 requires the X-Amz-Algorithm, X-Amz-Credential, X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and X-Amz-Expires parameters.",
    );
  }
  if (params.get("X-Amz-Algorithm") !== ALGORITHM_IDENTIFIER)
    return authError("AuthorizationQueryParametersError", 'X-Amz-Algorithm only supports "AWS4-HMAC-SHA256"');
  const amzDate = params.get("X-Amz-Date")!;
  const signingDate = parseAmzDate(amzDate);
  if (!signingDate)
    return authError("AuthorizationQueryParametersError", "X-Amz-Date must be in the ISO8601 Long Format \"yyyyMMdd'T'HHmmss'Z'\"");
  const expires = params.get("X-Amz-Expires")!;
  if (!/^\d{1,7}$/.test(expires) || Number(expires) < 1)
    return authError("AuthorizationQueryParametersError", "X-Amz-Expires must be a whole number of seconds from 1 to 604800.");
  if (Number(expires) > MAX_PRESIGNED_EXPIRES_S)
    return authError("AuthorizationQueryParametersError", "X-Amz-Expires must be less than a week (in seconds) that is 604800");
  // Clients hoist x-amz-* headers into the query when presigning; the SDK's presigner signs
  // UNSIGNED-PAYLOAD without putting it there, so that is the default.
  const contentSha256 = query.find(([key]) => key.toLowerCase() === "x-amz-content-sha256")?.[1] ?? "UNSIGNED-PAYLOAD";
  const payloadMode = payloadModeOf(contentSha256);
  if (payloadMode !== "unsigned" && payloadMode !== "sha256")
    return authError(
      "AuthorizationQueryParametersError",
      "X-Amz-Content-Sha256 of a presigned request must be UNSIGNED-PAYLOAD or a hex SHA-256.",
    );
  return assemble("presigned", "AuthorizationQueryParametersError", {
    credential: params.get("X-Amz-Credential")!,
    signedHeaders: params.get("X-Amz-SignedHeaders")!,
    signature: params.get("X-Amz-Signature")!,
    amzDate,
    signingDate,
    payloadHash: contentSha256,
    payloadMode,
    expiresSeconds: Number(expires),
  });
}

interface RawAuth {
  credential: string;
  signedHeaders: string;
  signature: string;
  amzDate: string;
  signingDate: Date;
  payloadHash: string;
  payloadMode: PayloadMode;
  expiresSeconds: number | null;
}

function assemble(
  kind: ParsedAuth["kind"],
  malformed: "AuthorizationHeaderMalformed" | "AuthorizationQueryParametersError",
  raw: RawAuth,
): ParsedAuth | S3AuthError {
  const where = kind === "header" ? "The authorization header is malformed; " : "Error parsing the X-Amz-Credential parameter; ";
  const parts = raw.credential.split("/");
  if (parts.length !== 5 || parts.some((part) => part === "")) return authError(malformed, where + MALFORMED_CREDENTIAL);
  const [accessKeyId, date, region, service, terminator] = parts as [string, string, string, string, string];
  if (date !== raw.amzDate.slice(0, 8))
    return authError(
      malformed,
      `${where}Invalid credential date "${date}". This date is not the same as X-Amz-Date: "${raw.amzDate.slice(0, 8)}".`,
    );
  if (service !== "s3") return authError(malformed, `${where}incorrect service "${service}". This endpoint belongs to "s3".`);
  if (terminator !== "aws4_request")
    return authError(malformed, `${where}incorrect terminal "${terminator}". This endpoint uses "aws4_request".`);
  const signedHeaders = raw.signedHeaders.split(";");
  if (signedHeaders.some((name) => !HEADER_NAME.test(name)) || new Set(signedHeaders).size !== signedHeaders.length) {
    return authError(
      malformed,
      `${kind === "header" ? "The authorization header is malformed; " : ""}SignedHeaders must be distinct lower-case header names separated by ";".`,
    );
  }
  if (!signedHeaders.includes("host")) return authError("AccessDenied", "The host header must be among the signed headers.");
  if (!SIGNATURE.test(raw.signature))
    return authError(
      malformed,
      `${kind === "header" ? "The authorization header is malformed; " : ""}the Signature must be 64 lower-case hex digits.`,
    );
  return {
    kind,
    accessKeyId,
    amzDate: raw.amzDate,
    signingDate: raw.signingDate,
    region,
    service,
    scope: `${date}/${region}/${service}/${terminator}`,
    signedHeaders,
    signature: raw.signature,
    payloadHash: raw.payloadHash,
    payloadMode: raw.payloadMode,
    expiresSeconds: raw.expiresSeconds,
  };
}

function payloadModeOf(contentSha256: string): PayloadMode | null {
  if (/^[0-9a-f]{64}$/.test(contentSha256)) return "sha256";
  return PAYLOAD_MARKERS[contentSha256] ?? null;
}

function parseAmzDate(text: string): Date | null {
  const m = AMZ_DATE.exec(text);
  if (!m) return null;
  const date = new Date(Date.UTC(+m[1]!, +m[2]! - 1, +m[3]!, +m[4]!, +m[5]!, +m[6]!));
  // Date.UTC rolls 20130231 over to March; a date that does not round-trip was not a date.
  return date.toISOString().replace(/[-:]|\.\d{3}/g, "") === text ? date : null;
}

/**
 * Checks the signature of `request` as parsed by parseSigV4 against `secret`, at time `now`.
 * Returns null when it holds. Time is checked first (no secret involved): a header-signed
 * request more than 15 minutes off gets RequestTimeTooSkewed, an expired presigned URL gets
 * AccessDenied "Request has expired" as S3 answers it (ExpiredToken is S3's code for expired
 * session credentials, which this endpoint does not issue). The body is not read: for
 * payloadMode "sha256" check it with payloadSha256Check, for the streaming modes pipe it through
 * awsChunkedDecoder.
 *
 * @example
 * const error = await verifySigV4(request, parsed, token.secret, new Date());
 * if (error) return s3ErrorResponse(error, path, requestId);
 */
export async function verifySigV4(request: Request, parsed: ParsedAuth, secret: string, now: Date): Promise<S3AuthError | null> {
  const signedAt = parsed.signingDate.getTime();
  if (parsed.kind === "header") {
    if (Math.abs(now.getTime() - signedAt) > MAX_CLOCK_SKEW_MS)
      return authError("RequestTimeTooSkewed", "The difference between the request time and the server's time is too large.");
  } else {
    if (now.getTime() > signedAt + parsed.expiresSeconds! * 1000) return authError("AccessDenied", "Request has expired");
    if (signedAt - now.getTime() > MAX_CLOCK_SKEW_MS) return authError("AccessDenied", "Request is not valid yet");
  }

  const url = new URL(request.url);
  const headers: Record<string, string> = {};
  for (const name of parsed.signedHeaders) {
    // workerd and Node both expose Host among the headers; the URL is the fallback for
    // runtimes that hide it.
    const value = name === "host" ? (request.headers.get("host") ?? url.host) : request.headers.get(name);
    if (value === null) return authError("AccessDenied", `The signed header "${name}" is not in the request.`);
    headers[name] = value;
  }
  // S3 refuses unsigned x-amz-* headers (they change what a request does: x-amz-trailer,
  // x-amz-decoded-content-length, x-amz-meta-*). x-amz-content-sha256 is bound anyway: it is the
  // canonical request's last line.
  for (const [name] of request.headers) {
    if (name.startsWith("x-amz-") && name !== "x-amz-content-sha256" && !(name in headers)) {
      return authError("AccessDenied", `There were headers present in the request which were not signed: ${name}`);
    }
  }

  const query: Record<string, string[]> = {};
  for (const [key, value] of parseQuery(url.search) ?? []) (query[key] ??= []).push(value);
  const signer = new RequestVerifier(parsed, secret);
  const canonicalRequest = signer.canonicalRequest(
    {
      method: request.method.toUpperCase(),
      protocol: url.protocol,
      hostname: url.hostname,
      path: canonicalUri(url.pathname),
      query,
      headers,
    },
    // signableHeaders lifts the library's rule that user-agent, expect, ... are never signed: a
    // client that listed them signed them.
    getCanonicalHeaders({ method: "", protocol: "", hostname: "", path: "", headers }, undefined, new Set(parsed.signedHeaders)),
    parsed.payloadHash,
  );
  const expected = await signer.sign(await signer.stringToSign(parsed.amzDate, parsed.scope, canonicalRequest), signer.signingOptions);
  if (!constantTimeEqual(expected, parsed.signature)) {
    return authError(
      "SignatureDoesNotMatch",
      "The request signature we calculated does not match the signature you provided. Check your key and signing method.",
    );
  }
  return null;
}

// The library's SigV4 steps, reached through subclassing: the canonical request and string to
// sign are protected members, and `sign(string)` derives the signing key (cached per secret,
// date, region and service) and applies the final HMAC.
class RequestVerifier extends SignatureV4 {
  readonly signingOptions: { signingDate: Date; signingRegion: string; signingService: string };

  constructor(parsed: ParsedAuth, secret: string) {
    // uriEscapePath false: S3 signs the path encoded once, which canonicalUri already produced.
    super({
      credentials: { accessKeyId: parsed.accessKeyId, secretAccessKey: secret },
      region: parsed.region,
      service: parsed.service,
      sha256: Sha256,
      uriEscapePath: false,
      applyChecksum: false,
    });
    this.signingOptions = { signingDate: parsed.signingDate, signingRegion: parsed.region, signingService: parsed.service };
  }

  canonicalRequest(...args: Parameters<SignatureV4["createCanonicalRequest"]>): string {
    return this.createCanonicalRequest(...args);
  }

  stringToSign(amzDate: string, scope: string, canonicalRequest: string): Promise<string> {
    return this.createStringToSign(amzDate, scope, canonicalRequest, ALGORITHM_IDENTIFIER);
  }
}

/**
 * The canonical URI S3 signs: each segment decoded and encoded again with SigV4's UriEncode
 * (everything but A-Z a-z 0-9 - _ . ~ as %XX), the slashes between segments kept. For what SDKs
 * send (already encoded that way) this is the path as sent; a client that leaves `$` or `+` raw
 * signs them encoded, as in AWS's own PUT example (`/test$file.text` signs as
 * `/test%24file.text`). `%2F` inside a segment stays `%2F`. A segment that is not valid
 * percent-encoding is kept as sent.
 *
 * @example
 * canonicalUri("/api/cloud/storage/results/a b+c/x%2Fy"); // "/api/cloud/storage/results/a%20b%2Bc/x%2Fy"
 */
export function canonicalUri(rawPath: string): string {
  return rawPath
    .split("/")
    .map((segment) => {
      try {
        return uriEncode(decodeURIComponent(segment));
      } catch {
        return segment;
      }
    })
    .join("/");
}

function uriEncode(text: string): string {
  return encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

// The query as [key, value] pairs, percent-decoded. Unlike URLSearchParams a `+` stays a plus:
// SigV4 clients encode spaces as %20, and a literal `+` they sent raw must sign as %2B. Null
// when the percent-encoding is invalid.
function parseQuery(search: string): [string, string][] | null {
  const text = search.startsWith("?") ? search.slice(1) : search;
  if (text === "") return [];
  const pairs: [string, string][] = [];
  try {
    for (const part of text.split("&")) {
      if (part === "") continue;
      const eq = part.indexOf("=");
      pairs.push(eq < 0 ? [decodeURIComponent(part), ""] : [decodeURIComponent(part.slice(0, eq)), decodeURIComponent(part.slice(eq + 1))]);
    }
  } catch {
    return null;
  }
  return pairs;
}

/**
 * The signer the aws-chunked decoder needs for STREAMING-AWS4-HMAC-SHA256-PAYLOAD(-TRAILER)
 * bodies: the request's signature seeds the chain of chunk signatures, each an HMAC with the
 * request's signing key. Call it only after verifySigV4 accepted the request.
 *
 * @example
 * const decoder = awsChunkedDecoder({ ...options, signer: chunkSigner(parsed, secret) });
 */
export function chunkSigner(parsed: ParsedAuth, secret: string): ChunkSigner {
  const signer = new RequestVerifier(parsed, secret);
  return {
    seedSignature: parsed.signature,
    amzDate: parsed.amzDate,
    scope: parsed.scope,
    sign: (stringToSign) => signer.sign(stringToSign, signer.signingOptions),
  };
}

/**
 * The check of a body whose x-amz-content-sha256 is a hex SHA-256 (payloadMode "sha256"):
 * XAmzContentSHA256Mismatch when the body's hash is not `expectedHex`. upload-body.ts runs it
 * before the body's last bytes reach R2, so a body that does not match its signature is never
 * stored.
 *
 * @example
 * const check = payloadSha256Check(parsed.payloadHash);
 */
export function payloadSha256Check(expectedHex: string): BodyCheck {
  return {
    checksum: createChecksum("sha256"),
    done(digest) {
      if (!constantTimeEqual(toHex(digest), expectedHex))
        throw new S3Error("XAmzContentSHA256Mismatch", "The provided 'x-amz-content-sha256' header does not match what was computed.");
    },
  };
}
