import type { ObjectMetadata } from "../../bucket";
import { downloadHeaders } from "../download-headers";
import { objectHeaders, parseRange, rangedBody } from "../download";
import { S3Error } from "../errors";
import { adjustUsage, reserveUsage, storageQuota } from "../quota";
import { quote } from "../responses";
import { objectBody, storeSized } from "../upload-body";
import type { ObjectCall } from "./call";

/** A single PUT larger than this cannot pass Cloudflare's request body limit: use multipart. */
export const MAX_SINGLE_PUT_BYTES = 100 * 1024 * 1024;

/** The metadata an upload request sets on its object. */
export function metadataOf(request: Request): ObjectMetadata {
  return {
    contentType: request.headers.get("content-type") ?? undefined,
    contentDisposition: request.headers.get("content-disposition") ?? undefined,
  };
}

/** PutObject: the body streams into R2, all or nothing, within the job's quota. */
export async function putObject({ request, db, bucket, name, storedKey, payload }: ObjectCall): Promise<Response> {
  const body = objectBody(request, payload);
  if (body.length > MAX_SINGLE_PUT_BYTES)
    throw new S3Error(
      "EntityTooLarge",
      `A single PUT may be at most ${MAX_SINGLE_PUT_BYTES} bytes here (the platform's request limit): upload larger files as multipart (aws s3 cp and boto3 upload_file do so above their multipart threshold).`,
    );
  // Room is reserved before any byte reaches R2: over the quota, nothing is stored.
  // A replaced object's bytes are counted as freed at once (two replacing uploads at once
  // may so under-count by one object's size until either finishes; never more).
  const replaced = await bucket.head(storedKey);
  const reserved = { bytes: body.length - (replaced?.size ?? 0), objects: replaced ? 0 : 1 };
  await reserveUsage(db, name, await storageQuota(db), reserved);
  // A body refused while streaming (bad checksum, wrong length) errors the stream, and R2
  // then stores nothing: a put is all or nothing, and an object it would replace stays.
  const object = await storeSized(body, (sized) => bucket.put(storedKey, sized, { httpMetadata: metadataOf(request) })).catch(
    async (error: unknown) => {
      await adjustUsage(db, name, { bytes: -reserved.bytes, objects: -reserved.objects });
      throw error;
    },
  );
  return new Response(null, { status: 200, headers: { etag: quote(object!.etag) } });
}

/** CopyObject (a PUT with x-amz-copy-source) is not kept: it is refused rather than stored as an empty object. */
export async function copyObject(_call: ObjectCall): Promise<Response> {
  throw new S3Error("NotImplemented", "CopyObject is not supported by this endpoint.");
}

/** The object's description, its requested range and its headers, for GetObject and HeadObject alike. */
async function describe({ request, bucket, key, storedKey, access }: ObjectCall) {
  const head = await bucket.head(storedKey);
  if (!head) throw new S3Error("NoSuchKey", "The specified key does not exist.");
  const range = parseRange(request.headers.get("range"), head.size);
  // Never runnable in this origin, however it is read (download-headers.ts).
  const headers = {
    ...objectHeaders(head),
    ...downloadHeaders(key, access.kind === "user" ? "user" : "signed", head.httpMetadata?.contentDisposition),
  };
  return { head, range, headers };
}

/** GetObject: the object's bytes, or the range asked for (206), read from R2 a step at a time. */
export async function getObject(call: ObjectCall): Promise<Response> {
  const { head, range, headers } = await describe(call);
  const span = range ?? { offset: 0, length: head.size };
  headers["content-length"] = String(span.length);
  if (range) headers["content-range"] = `bytes ${range.offset}-${range.offset + range.length - 1}/${head.size}`;
  return new Response(rangedBody(call.bucket, call.storedKey, head.etag, span), { status: range ? 206 : 200, headers });
}

/** HeadObject: GetObject's headers with the whole object's length, and no body. */
export async function headObject(call: ObjectCall): Promise<Response> {
  const { head, headers } = await describe(call);
  return new Response(null, { status: 200, headers: { ...headers, "content-length": String(head.size) } });
}

/** DeleteObject: gone from R2 and from the job's quota; deleting a missing key succeeds too, as in S3. */
export async function deleteObject({ db, bucket, name, storedKey }: ObjectCall): Promise<Response> {
  const deleted = await bucket.head(storedKey);
  await bucket.delete(storedKey);
  if (deleted) await adjustUsage(db, name, { bytes: -deleted.size, objects: -1 });
  return new Response(null, { status: 204 });
}
