import type { Database } from "../db/client";
import { awsChunkedDecoder, awsChunkedOptions, isAwsChunked } from "./chunked";
import { checksumAlgorithmOfHeader, checksumTap, createChecksum, digestTap, toBase64, toHex, type ChecksumAlgorithm } from "./checksums";
import { lookupStorageCredentials, providerJobDirectory, storageDirectories } from "./credentials";
import { downloadHeaders } from "./download-headers";
import { S3Error } from "./errors";
import { largeChunks } from "./large-chunks";
import { adjustUsage, assertFits, reserveUsage, storageQuota } from "./quota";
import { forgetUpload, listParts, listUploads, partsForCompletion, recordPart, recordUpload } from "./uploads";
import { chunkSigner, parseSigV4, payloadSha256Verifier, verifySigV4 } from "./sigv4";
import { MAX_COMPLETE_MULTIPART_BYTES, parseCompleteMultipartUpload, readLimitedText, s3ErrorResponse, xmlEscape } from "./xml";

/*
 * The S3-compatible storage endpoint (spec 4.7) over R2, path-style:
 * `/api/cloud/storage` (ListBuckets), `/api/cloud/storage/{bucket}` (ListObjectsV2, HeadBucket),
 * `/api/cloud/storage/{bucket}/{key}` (objects and multipart uploads). A job's bucket is its job
 * id; its objects live in R2 under `<output root>/<job id>/<key>`, the output root fixed when the
 * job's first credentials were issued (credentials.ts). Requests are SigV4-signed with the job's
 * credentials, which reach that bucket only and only while the job is active, or with a
 * provider's manual pair; users read with their session or API key. Bodies stream into R2
 * (FixedLengthStream: R2 needs the length up front) and never sit in memory whole.
 */

/** An R2 object as far as this file reads one. */
interface StoredObject {
  key: string;
  size: number;
  etag: string;
  uploaded: Date;
  httpMetadata?: { contentType?: string; contentDisposition?: string };
}

/** What an upload may say about how its object is served later (S3's Content-Type and Content-Disposition). */
type ObjectMetadata = { contentType?: string; contentDisposition?: string };

/** The metadata an upload request sets on its object. */
function metadataOf(request: Request): ObjectMetadata {
  return {
    contentType: request.headers.get("content-type") ?? undefined,
    contentDisposition: request.headers.get("content-disposition") ?? undefined,
  };
}

/**
 * The R2 calls this endpoint makes (workerd's R2Bucket), typed here rather than through the
 * Workers types so that Node-side checks of the tests that import this file need none.
 */
export interface StorageBucket {
  put(key: string, value: ReadableStream, options?: { httpMetadata?: ObjectMetadata }): Promise<StoredObject | null>;
  head(key: string): Promise<StoredObject | null>;
  get(
    key: string,
    options?: { range?: { offset: number; length: number }; onlyIf?: { etagMatches?: string } },
  ): Promise<StoredObject | (StoredObject & { body: ReadableStream }) | null>;
  delete(key: string): Promise<void>;
  list(options: {
    prefix?: string;
    delimiter?: string;
    limit?: number;
    cursor?: string;
    startAfter?: string;
  }): Promise<{ objects: StoredObject[]; delimitedPrefixes: string[]; truncated: boolean; cursor?: string }>;
  createMultipartUpload(key: string, options?: { httpMetadata?: ObjectMetadata }): Promise<{ uploadId: string }>;
  resumeMultipartUpload(
    key: string,
    uploadId: string,
  ): {
    uploadPart(partNumber: number, value: ReadableStream): Promise<{ partNumber: number; etag: string }>;
    abort(): Promise<void>;
    complete(parts: { partNumber: number; etag: string }[]): Promise<StoredObject>;
  };
}

// workerd's stream of a declared length (R2 needs one to accept a stream).
declare const FixedLengthStream: new (length: number) => TransformStream<Uint8Array, Uint8Array>;

export const STORAGE_PREFIX = "/api/cloud/storage";
/** S3's own limit on key length, in UTF-8 bytes. */
const MAX_KEY_BYTES = 1024;
/** A single PUT larger than this cannot pass Cloudflare's request body limit: use multipart. */
export const MAX_SINGLE_PUT_BYTES = 100 * 1024 * 1024;
const MAX_LIST_KEYS = 1000;
/**
 * S3 subresources this endpoint does not keep (ACLs, tags, policies, versioning, ...): a request
 * for one is NotImplemented, not mistaken for the object or listing it would otherwise address.
 */
const UNSUPPORTED_SUBRESOURCES = [
  "acl",
  "tagging",
  "policy",
  "cors",
  "lifecycle",
  "versioning",
  "versions",
  "website",
  "logging",
  "notification",
  "replication",
  "encryption",
  "object-lock",
  "retention",
  "legal-hold",
  "attributes",
  "torrent",
  "restore",
  "select",
  "accelerate",
  "requestPayment",
  "ownershipControls",
  "publicAccessBlock",
  "analytics",
  "metrics",
  "inventory",
  "intelligent-tiering",
];

function xml(body: string, status = 200, headers: Record<string, string> = {}): Response {
  return new Response(`<?xml version="1.0" encoding="UTF-8"?>\n${body}`, {
    status,
    headers: { "content-type": "application/xml", ...headers },
  });
}

const quote = (etag: string) => (etag.startsWith('"') ? etag : `"${etag}"`);

interface Target {
  bucket: string | null;
  key: string | null;
}

/** Bucket and key of a path under STORAGE_PREFIX, with the key checked (no `.`/`..` parts, not too long). */
export function storageTarget(rawPath: string): Target {
  const rest = rawPath.slice(STORAGE_PREFIX.length).replace(/^\/+/, "");
  if (rest === "") return { bucket: null, key: null };
  const slash = rest.indexOf("/");
  const decode = (text: string, what: string) => {
    try {
      return decodeURIComponent(text);
    } catch {
      throw new S3Error("InvalidArgument", `The ${what} is not valid percent-encoding.`);
    }
  };
  const bucket = decode(slash < 0 ? rest : rest.slice(0, slash), "bucket name");
  const rawKey = slash < 0 ? "" : rest.slice(slash + 1);
  if (rawKey === "") return { bucket, key: null };
  const key = decode(rawKey, "object key");
  if (new TextEncoder().encode(key).byteLength > MAX_KEY_BYTES)
    throw new S3Error("KeyTooLongError", `Your key is too long: at most ${MAX_KEY_BYTES} bytes.`);
  if (key.startsWith("/") || key.split("/").some((part) => part === "." || part === "..") || /[\u0000-\u001f\\]/.test(key)) {
    throw new S3Error(
      "InvalidArgument",
      `The object key "${key}" is refused: it may not start with "/", contain "." or ".." parts, backslashes or control characters.`,
    );
  }
  return { bucket, key };
}

/** The route pattern of a storage path, for metrics labels (bounded: never the bucket or key). */
export function storagePattern(path: string): string | null {
  if (path !== STORAGE_PREFIX && !path.startsWith(`${STORAGE_PREFIX}/`)) return null;
  const depth = path.slice(STORAGE_PREFIX.length).split("/").filter(Boolean).length;
  return depth === 0 ? STORAGE_PREFIX : depth === 1 ? `${STORAGE_PREFIX}/{bucket}` : `${STORAGE_PREFIX}/{bucket}/{key}`;
}

/** The R2 key of `key` in job `bucket`'s directory under `root`. */
export const objectKey = (root: string, bucket: string, key: string) => `${root}/${bucket}/${key}`;

/** The request body as a stream of the object's bytes: aws-chunked decoded, a signed hash checked. */
function objectBody(
  request: Request,
  payload: { mode: string; hash: string; signer?: ReturnType<typeof chunkSigner> },
): { stream: ReadableStream<Uint8Array>; length: number } {
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
 */
async function storeSized<T>(
  stream: ReadableStream<Uint8Array>,
  length: number,
  store: (body: ReadableStream<Uint8Array>) => Promise<T>,
): Promise<T> {
  const fixed = new FixedLengthStream(length);
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

async function listObjects(bucket: StorageBucket, outputRoot: string, name: string, url: URL): Promise<Response> {
  const q = url.searchParams;
  const prefix = q.get("prefix") ?? "";
  const delimiter = q.get("delimiter") ?? undefined;
  const maxKeys = countParam(url, "max-keys", MAX_LIST_KEYS, MAX_LIST_KEYS);
  const token = q.get("continuation-token");
  const startAfter = q.get("start-after");
  const root = `${outputRoot}/${name}/`;
  const listed: Awaited<ReturnType<StorageBucket["list"]>> =
    maxKeys === 0
      ? { objects: [], delimitedPrefixes: [], truncated: false }
      : await bucket.list({
          prefix: root + prefix,
          delimiter,
          limit: maxKeys,
          cursor: token ?? undefined,
          startAfter: !token && startAfter ? root + startAfter : undefined,
        });
  const contents = listed.objects
    .map(
      (o) =>
        `<Contents><Key>${xmlEscape(o.key.slice(root.length))}</Key><LastModified>${o.uploaded.toISOString()}</LastModified><ETag>${xmlEscape(quote(o.etag))}</ETag><Size>${o.size}</Size><StorageClass>STANDARD</StorageClass></Contents>`,
    )
    .join("");
  const prefixes = listed.delimitedPrefixes
    .map((p) => `<CommonPrefixes><Prefix>${xmlEscape(p.slice(root.length))}</Prefix></CommonPrefixes>`)
    .join("");
  const next =
    listed.truncated && "cursor" in listed && listed.cursor
      ? `<NextContinuationToken>${xmlEscape(listed.cursor)}</NextContinuationToken>`
      : "";
  return xml(
    `<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>${xmlEscape(name)}</Name><Prefix>${xmlEscape(prefix)}</Prefix>${delimiter ? `<Delimiter>${xmlEscape(delimiter)}</Delimiter>` : ""}<MaxKeys>${maxKeys}</MaxKeys><KeyCount>${listed.objects.length + listed.delimitedPrefixes.length}</KeyCount><IsTruncated>${listed.truncated}</IsTruncated>${token ? `<ContinuationToken>${xmlEscape(token)}</ContinuationToken>` : ""}${next}${contents}${prefixes}</ListBucketResult>`,
  );
}

/** A whole-number query parameter from 0 to `max` (S3's max-keys, max-parts, max-uploads, markers), `fallback` when absent. */
function countParam(url: URL, name: string, fallback: number, max: number): number {
  const raw = url.searchParams.get(name);
  if (raw === null || raw === "") return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 0) throw new S3Error("InvalidArgument", `${name} must be a whole number from 0, not "${raw}".`);
  return Math.min(value, max);
}

/** ListParts: the parts of one of the job's uploads in progress, paged by part number. */
async function listUploadParts(db: Database, name: string, key: string, uploadId: string, url: URL): Promise<Response> {
  const marker = countParam(url, "part-number-marker", 0, 10_000);
  const max = countParam(url, "max-parts", 1000, 1000);
  const listed = await listParts(db, name, key, uploadId, { marker, max });
  if (!listed) throw new S3Error("NoSuchUpload", "The specified multipart upload does not exist: it may have been completed or aborted.");
  const parts = listed.parts
    .map(
      (p) =>
        `<Part><PartNumber>${p.partNumber}</PartNumber><LastModified>${p.uploaded}</LastModified><ETag>${xmlEscape(quote(p.etag))}</ETag><Size>${p.size}</Size></Part>`,
    )
    .join("");
  const next = listed.truncated ? `<NextPartNumberMarker>${listed.parts.at(-1)!.partNumber}</NextPartNumberMarker>` : "";
  return xml(
    `<ListPartsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Bucket>${xmlEscape(name)}</Bucket><Key>${xmlEscape(key)}</Key><UploadId>${xmlEscape(uploadId)}</UploadId><PartNumberMarker>${marker}</PartNumberMarker>${next}<MaxParts>${max}</MaxParts><IsTruncated>${listed.truncated}</IsTruncated><StorageClass>STANDARD</StorageClass>${parts}</ListPartsResult>`,
  );
}

/** ListMultipartUploads: the job's uploads in progress, by key then upload id (prefix and markers; keys in full, no delimiter grouping). */
async function listMultipartUploads(db: Database, name: string, url: URL): Promise<Response> {
  const q = url.searchParams;
  const prefix = q.get("prefix") ?? "";
  const keyMarker = q.get("key-marker") ?? "";
  const uploadIdMarker = q.get("upload-id-marker") ?? "";
  const max = countParam(url, "max-uploads", 1000, 1000);
  const listed = await listUploads(db, name, { prefix, keyMarker, uploadIdMarker, max });
  const last = listed.uploads.at(-1);
  const next =
    listed.truncated && last
      ? `<NextKeyMarker>${xmlEscape(last.key)}</NextKeyMarker><NextUploadIdMarker>${xmlEscape(last.uploadId)}</NextUploadIdMarker>`
      : "";
  const uploads = listed.uploads
    .map(
      (u) =>
        `<Upload><Key>${xmlEscape(u.key)}</Key><UploadId>${xmlEscape(u.uploadId)}</UploadId><Initiated>${u.initiated}</Initiated><StorageClass>STANDARD</StorageClass></Upload>`,
    )
    .join("");
  return xml(
    `<ListMultipartUploadsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Bucket>${xmlEscape(name)}</Bucket><KeyMarker>${xmlEscape(keyMarker)}</KeyMarker><UploadIdMarker>${xmlEscape(uploadIdMarker)}</UploadIdMarker>${next}<Prefix>${xmlEscape(prefix)}</Prefix><MaxUploads>${max}</MaxUploads><IsTruncated>${listed.truncated}</IsTruncated>${uploads}</ListMultipartUploadsResult>`,
  );
}

function objectHeaders(object: StoredObject): Record<string, string> {
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
 */
function rangedBody(
  bucket: StorageBucket,
  key: string,
  etag: string,
  span: { offset: number; length: number },
): ReadableStream<Uint8Array> {
  const { readable, writable } = new FixedLengthStream(span.length);
  const end = span.offset + span.length;
  const pump = async () => {
    for (let at = span.offset; at < end; at += READ_STEP_BYTES) {
      const length = Math.min(READ_STEP_BYTES, end - at);
      const part = await bucket.get(key, { range: { offset: at, length }, onlyIf: { etagMatches: etag } });
      if (!part || !("body" in part)) throw new Error(`${key} changed or vanished during the download`);
      await (part.body as ReadableStream<Uint8Array>).pipeTo(writable, { preventClose: true });
    }
    await writable.close();
  };
  // A client that goes away errors the pipe; either way the response then ends short of its length.
  pump().catch((error: unknown) => writable.abort(error).catch(() => {}));
  return readable;
}

/** A `Range: bytes=a-b` header as R2's range, or null for none; throws InvalidRange for one S3 would refuse. */
function parseRange(header: string | null, size: number): { offset: number; length: number } | null {
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

/**
 * A user who called with a session or API key instead of a job's signature (the route identifies
 * them): they read the results of the jobs they may act on, `ownerId` null meaning everyone's
 * (leads and admins), else their own.
 */
export interface StorageUser {
  username: string;
  ownerId: number | null;
}

type Payload = { mode: string; hash: string; signer?: ReturnType<typeof chunkSigner> };
type Access =
  | { kind: "job"; jobId: string; outputRoot: string; payload: Payload }
  /** A provider's manually configured credentials: any active job of that provider. */
  | { kind: "provider"; provider: string; payload: Payload }
  | { kind: "user"; owner: string; ownerId: number | null };

const refusal = (inactive: { code: "ExpiredToken" | "AccessDenied"; reason: string }) =>
  new S3Error(
    inactive.code,
    inactive.code === "ExpiredToken" ? `The provided token has expired: ${inactive.reason}.` : `Access Denied: ${inactive.reason}.`,
  );

/** Whose credentials signed `request` (a job's, or a provider's manual pair), after checking the signature. */
async function signedAccess(request: Request, db: Database): Promise<Access> {
  const parsed = parseSigV4(request);
  if (parsed instanceof S3Error) throw parsed;
  const credentials = await lookupStorageCredentials(db, parsed.accessKeyId);
  if (credentials === null) throw new S3Error("InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records.");
  if (!credentials.active) throw refusal(credentials);
  const refused = await verifySigV4(request, parsed, credentials.secret, new Date());
  if (refused) throw refused;
  const signer = parsed.payloadMode.startsWith("streaming-signed") ? chunkSigner(parsed, credentials.secret) : undefined;
  const payload = { mode: parsed.payloadMode, hash: parsed.payloadHash, signer };
  if (credentials.kind === "provider") return { kind: "provider", provider: credentials.provider, payload };
  return { kind: "job", jobId: credentials.jobId, outputRoot: credentials.outputRoot, payload };
}

/** Whether a request carries an S3 signature (header or presigned), rather than a user's credential. */
export function isSigned(request: Request): boolean {
  return (
    /^AWS4-HMAC-SHA256\s/i.test(request.headers.get("authorization") ?? "") || new URL(request.url).searchParams.has("X-Amz-Signature")
  );
}

/**
 * Answers one storage request. `db` resolves credentials; `bucket` is the R2 bucket. Every refusal
 * is S3 XML with S3's status, and a refused write stores nothing.
 */
export async function handleStorage(
  request: Request,
  db: Database,
  bucket: StorageBucket,
  requestId: string,
  user: StorageUser | null = null,
): Promise<Response> {
  const url = new URL(request.url);
  const rawPath = url.pathname;
  const method = request.method;
  try {
    // A user's session or API key (the route identified it) reads the results of the jobs they
    // may act on; everyone else signs, with a job's credentials or a provider's manual pair.
    const access: Access = user ? { kind: "user", owner: user.username, ownerId: user.ownerId } : await signedAccess(request, db);
    const target = storageTarget(rawPath);
    if (access.kind === "user" && method !== "GET" && method !== "HEAD")
      throw new S3Error(
        "AccessDenied",
        "With a session or API key the storage endpoint is read-only: jobs upload with their own credentials.",
      );
    if (target.bucket === null) {
      if (method !== "GET") throw new S3Error("MethodNotAllowed", "The specified method is not allowed against this resource.");
      // A job sees its own bucket; a user the buckets of the jobs they may act on.
      // A provider's manual credentials the buckets of its active jobs.
      const buckets = await storageDirectories(
        db,
        access.kind === "job"
          ? { jobId: access.jobId }
          : access.kind === "provider"
            ? { provider: access.provider }
            : { ownerId: access.ownerId },
      );
      const entries = buckets
        .map((b) => `<Bucket><Name>${xmlEscape(b.jobId)}</Name><CreationDate>${b.createdAt}</CreationDate></Bucket>`)
        .join("");
      const owner = access.kind === "job" ? access.jobId : access.kind === "provider" ? access.provider : access.owner;
      return xml(
        `<ListAllMyBucketsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Owner><ID>${xmlEscape(owner)}</ID></Owner><Buckets>${entries}</Buckets></ListAllMyBucketsResult>`,
      );
    }
    if (access.kind === "job" && target.bucket !== access.jobId)
      throw new S3Error("AccessDenied", `These credentials belong to job ${access.jobId}: bucket ${target.bucket} is not theirs.`);
    const name = target.bucket;
    let outputRoot: string;
    if (access.kind === "job") outputRoot = access.outputRoot;
    else if (access.kind === "provider") {
      const directory = await providerJobDirectory(db, access.provider, name);
      if ("active" in directory) throw refusal(directory);
      outputRoot = directory.outputRoot;
    } else {
      const [directory] = await storageDirectories(db, { jobId: name });
      if (!directory) throw new S3Error("NoSuchBucket", `No job ${name} has stored anything here.`);
      if (access.ownerId !== null && directory.userId !== access.ownerId)
        throw new S3Error(
          "AccessDenied",
          `Job ${name} is not yours: with a session or API key you read your own jobs' results (leads and admins: every job's).`,
        );
      outputRoot = directory.outputRoot;
    }

    const unsupported = UNSUPPORTED_SUBRESOURCES.find((name) => url.searchParams.has(name));
    if (unsupported) throw new S3Error("NotImplemented", `The ?${unsupported} subresource is not supported by this endpoint.`);
    if (target.key === null) {
      if (method === "HEAD") return new Response(null, { status: 200, headers: { "x-amz-bucket-region": "auto" } });
      if (method === "GET" && url.searchParams.has("location"))
        return xml(`<LocationConstraint xmlns="http://s3.amazonaws.com/doc/2006-03-01/">auto</LocationConstraint>`);
      if (method === "GET" && url.searchParams.has("uploads")) return await listMultipartUploads(db, name, url);
      if (method === "GET") return await listObjects(bucket, outputRoot, name, url);
      throw new S3Error("MethodNotAllowed", "Creating or deleting a job's bucket is not allowed: it exists as long as the job.");
    }
    const key = objectKey(outputRoot, name, target.key);
    const q = url.searchParams;
    const payload = access.kind === "user" ? { mode: "unsigned", hash: "UNSIGNED-PAYLOAD" } : access.payload;

    if (method === "POST" && q.has("uploads")) {
      await assertFits(db, name, await storageQuota(db), { bytes: 0, objects: (await bucket.head(key)) ? 0 : 1 });
      const upload = await bucket.createMultipartUpload(key, { httpMetadata: metadataOf(request) });
      await recordUpload(db, name, target.key, upload.uploadId);
      return xml(
        `<InitiateMultipartUploadResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Bucket>${xmlEscape(name)}</Bucket><Key>${xmlEscape(target.key)}</Key><UploadId>${xmlEscape(upload.uploadId)}</UploadId></InitiateMultipartUploadResult>`,
      );
    }
    const uploadId = q.get("uploadId");
    if (uploadId !== null) {
      const upload = bucket.resumeMultipartUpload(key, uploadId);
      if (method === "PUT") {
        const partNumber = Number(q.get("partNumber"));
        if (!Number.isInteger(partNumber) || partNumber < 1 || partNumber > 10_000)
          throw new S3Error("InvalidArgument", "partNumber must be a whole number from 1 to 10000.");
        const body = objectBody(request, payload);
        // S3 gives a part's MD5 as its ETag (R2's binding gives a tag of its own): computed on the
        // way, recorded with R2's tag, which completing the upload needs.
        let md5 = "";
        await assertFits(db, name, await storageQuota(db), { bytes: body.length, objects: 0 });
        const tapped = body.stream.pipeThrough(digestTap("MD5", (digest) => void (md5 = toHex(digest))));
        const part = await storeSized(tapped, body.length, (sized) => upload.uploadPart(partNumber, sized)).catch(noSuchUpload);
        await recordPart(db, uploadId, { partNumber, etag: md5, r2Etag: part.etag, size: body.length });
        return new Response(null, { status: 200, headers: { etag: quote(md5) } });
      }
      if (method === "POST") {
        const text = await readLimitedText(request.body, MAX_COMPLETE_MULTIPART_BYTES);
        if (text instanceof S3Error) throw text;
        const parts = parseCompleteMultipartUpload(text);
        if (parts instanceof S3Error) throw parts;
        const stored = await partsForCompletion(
          db,
          uploadId,
          parts.map((p) => ({ partNumber: p.partNumber, etag: p.etag.replace(/"/g, "") })),
        );
        if ("missing" in stored)
          throw new S3Error(
            "InvalidPart",
            `Part ${stored.missing} was not uploaded to this upload with the ETag given: list the parts stored with ListParts.`,
          );
        // The parts already count towards the quota; the object they make may be one too many.
        const replaced = await bucket.head(key);
        await assertFits(db, name, await storageQuota(db), { bytes: 0, objects: replaced ? 0 : 1 });
        const object = await upload.complete(stored).catch(noSuchUpload);
        await adjustUsage(db, name, { bytes: object.size - (replaced?.size ?? 0), objects: replaced ? 0 : 1 });
        await forgetUpload(db, uploadId);
        return xml(
          `<CompleteMultipartUploadResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Location>${xmlEscape(`${url.origin}${rawPath}`)}</Location><Bucket>${xmlEscape(name)}</Bucket><Key>${xmlEscape(target.key)}</Key><ETag>${xmlEscape(quote(object.etag))}</ETag></CompleteMultipartUploadResult>`,
        );
      }
      if (method === "DELETE") {
        await upload.abort().catch(noSuchUpload);
        await forgetUpload(db, uploadId);
        return new Response(null, { status: 204 });
      }
      if (method === "GET") return await listUploadParts(db, name, target.key, uploadId, url);
      throw new S3Error("MethodNotAllowed", "The specified method is not allowed against this resource.");
    }

    if (method === "PUT") {
      if (request.headers.has("x-amz-copy-source")) throw new S3Error("NotImplemented", "CopyObject is not supported by this endpoint.");
      const body = objectBody(request, payload);
      if (body.length > MAX_SINGLE_PUT_BYTES)
        throw new S3Error(
          "EntityTooLarge",
          `A single PUT may be at most ${MAX_SINGLE_PUT_BYTES} bytes here (the platform's request limit): upload larger files as multipart (aws s3 cp and boto3 upload_file do so above their multipart threshold).`,
        );
      // Room is reserved before any byte reaches R2: over the quota, nothing is stored.
      // A replaced object's bytes are counted as freed at once (two replacing uploads at once
      // may so under-count by one object's size until either finishes; never more).
      const replaced = await bucket.head(key);
      const reserved = { bytes: body.length - (replaced?.size ?? 0), objects: replaced ? 0 : 1 };
      await reserveUsage(db, name, await storageQuota(db), reserved);
      // A body refused while streaming (bad checksum, wrong length) errors the stream, and R2
      // then stores nothing: a put is all or nothing, and an object it would replace stays.
      const object = await storeSized(body.stream, body.length, (sized) =>
        bucket.put(key, sized, { httpMetadata: metadataOf(request) }),
      ).catch(async (error: unknown) => {
        await adjustUsage(db, name, { bytes: -reserved.bytes, objects: -reserved.objects });
        throw error;
      });
      return new Response(null, { status: 200, headers: { etag: quote(object!.etag) } });
    }
    if (method === "GET" || method === "HEAD") {
      const head = await bucket.head(key);
      if (!head) throw new S3Error("NoSuchKey", "The specified key does not exist.");
      const range = parseRange(request.headers.get("range"), head.size);
      // Never runnable in this origin, however it is read (download-headers.ts).
      const headers = {
        ...objectHeaders(head),
        ...downloadHeaders(target.key, access.kind === "user" ? "user" : "signed", head.httpMetadata?.contentDisposition),
      };
      if (method === "HEAD") return new Response(null, { status: 200, headers: { ...headers, "content-length": String(head.size) } });
      const span = range ?? { offset: 0, length: head.size };
      headers["content-length"] = String(span.length);
      if (range) headers["content-range"] = `bytes ${range.offset}-${range.offset + range.length - 1}/${head.size}`;
      return new Response(rangedBody(bucket, key, head.etag, span), { status: range ? 206 : 200, headers });
    }
    if (method === "DELETE") {
      const deleted = await bucket.head(key);
      await bucket.delete(key);
      if (deleted) await adjustUsage(db, name, { bytes: -deleted.size, objects: -1 });
      return new Response(null, { status: 204 });
    }
    throw new S3Error("MethodNotAllowed", "The specified method is not allowed against this resource.");
  } catch (error) {
    if (error instanceof S3Error) return s3ErrorResponse(error, rawPath, requestId, method);
    throw error;
  }
}

function noSuchUpload(error: unknown): never {
  if (!(error instanceof S3Error) && String(error).toLowerCase().includes("upload"))
    throw new S3Error("NoSuchUpload", "The specified multipart upload does not exist: it may have been completed or aborted.");
  throw error;
}
