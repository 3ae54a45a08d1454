import type { Database } from "../db/client";
import { accessOf, assertMayUse, bucketRoot, payloadOf, type StorageUser } from "./access";
import { objectKey, type StorageBucket } from "../bucket";
import { S3Error } from "./errors";
import { refuseUnsupported, runOperation } from "./operations";
import { s3ErrorResponse } from "./xml";

/*
 * The S3-compatible storage endpoint over R2, path-style: `/api/cloud/storage` (the service),
 * `/api/cloud/storage/{bucket}` (a job's bucket), `/api/cloud/storage/{bucket}/{key}` (its
 * objects and multipart uploads). Who may call and which buckets they reach is access.ts; the
 * operations, one small function each, are the table in operations.ts.
 */

export const STORAGE_PREFIX = "/api/cloud/storage";
/** S3's own limit on key length, in UTF-8 bytes. */
const MAX_KEY_BYTES = 1024;

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

/** Whether a request carries an S3 signature (header or presigned), rather than a user's credential. */
export function isSigned(request: Request): boolean {
  return (
    /^AWS4-HMAC-SHA256\s/i.test(request.headers.get("authorization") ?? "") || new URL(request.url).searchParams.has("X-Amz-Signature")
  );
}

/**
 * Answers one storage request: who calls (a signature checked, or the user the route
 * identified), what the path addresses, then the operation the table names for it. `db` resolves
 * credentials; `bucket` is the R2 bucket. Every refusal is S3 XML with S3's status, and a refused
 * write stores nothing.
 *
 * @example
 * return handleStorage(c.req.raw, c.get("db"), c.env.STORAGE, c.get("requestId"), user);
 */
export async function handleStorage(
  request: Request,
  db: Database,
  bucket: StorageBucket,
  requestId: string,
  user: StorageUser | null = null,
): Promise<Response> {
  const url = new URL(request.url);
  try {
    const access = await accessOf(request, db, user);
    const target = storageTarget(url.pathname);
    assertMayUse(access, request.method);
    if (target.bucket === null) return await runOperation("service", { request, url, db, access });
    const name = target.bucket;
    const outputRoot = await bucketRoot(db, access, name);
    refuseUnsupported(url);
    const call = { request, url, db, access, bucket, name, outputRoot };
    if (target.key === null) return await runOperation("bucket", call);
    const storedKey = objectKey(outputRoot, name, target.key);
    return await runOperation("object", { ...call, key: target.key, storedKey, payload: payloadOf(access) });
  } catch (error) {
    if (error instanceof S3Error) return s3ErrorResponse(error, url.pathname, requestId, request.method);
    throw error;
  }
}
