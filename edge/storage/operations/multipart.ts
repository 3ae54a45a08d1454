import { md5Checksum, toHex } from "../checksums";
import { S3Error } from "../errors";
import { adjustUsage, assertFits } from "../quota";
import { quote, xml } from "../responses";
import { objectBody, storeSized } from "../upload-body";
import { forgetUpload, listParts as storedParts, partsForCompletion, recordPart, recordUpload } from "../uploads";
import { MAX_COMPLETE_MULTIPART_BYTES, parseCompleteMultipartUpload, readLimitedText, xmlEscape } from "../xml";
import type { ObjectCall } from "./call";
import { countParam } from "./listing";
import { metadataOf } from "./objects";

/*
 * Multipart uploads: R2 keeps the parts, the database their S3 ETags (uploads.ts), which
 * ListParts and completing an upload read, and which count towards the job's quota.
 */

const noSuchUploadError = () =>
  new S3Error("NoSuchUpload", "The specified multipart upload does not exist: it may have been completed or aborted.");

/** R2's refusal of an upload it does not know, as S3's NoSuchUpload. */
function noSuchUpload(error: unknown): never {
  if (!(error instanceof S3Error) && String(error).toLowerCase().includes("upload")) throw noSuchUploadError();
  throw error;
}

/** The upload the request names (?uploadId; the operation table matched it). */
const uploadIdOf = (call: ObjectCall) => call.url.searchParams.get("uploadId")!;

/** CreateMultipartUpload: an upload begun in R2 and recorded, if one more object fits the job's quota. */
export async function createMultipartUpload({ request, db, bucket, name, key, storedKey }: ObjectCall): Promise<Response> {
  await assertFits(db, name, { bytes: 0, objects: (await bucket.head(storedKey)) ? 0 : 1 });
  const upload = await bucket.createMultipartUpload(storedKey, { httpMetadata: metadataOf(request) });
  await recordUpload(db, name, key, upload.uploadId);
  return xml(
    `<InitiateMultipartUploadResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Bucket>${xmlEscape(name)}</Bucket><Key>${xmlEscape(key)}</Key><UploadId>${xmlEscape(upload.uploadId)}</UploadId></InitiateMultipartUploadResult>`,
  );
}

/** UploadPart: one part streamed into R2 within the quota, answered with its MD5 as S3 does. */
export async function uploadPart(call: ObjectCall): Promise<Response> {
  const { request, db, bucket, name, storedKey, payload, url } = call;
  const uploadId = uploadIdOf(call);
  const upload = bucket.resumeMultipartUpload(storedKey, uploadId);
  const partNumber = Number(url.searchParams.get("partNumber"));
  if (!Number.isInteger(partNumber) || partNumber < 1 || partNumber > 10_000)
    throw new S3Error("InvalidArgument", "partNumber must be a whole number from 1 to 10000.");
  const body = objectBody(request, payload);
  // S3 gives a part's MD5 as its ETag (R2's binding gives a tag of its own): computed on the
  // way, recorded with R2's tag, which completing the upload needs.
  let md5 = "";
  await assertFits(db, name, { bytes: body.length, objects: 0 });
  body.checks.push({ checksum: md5Checksum(), done: (digest) => void (md5 = toHex(digest)) });
  const part = await storeSized(body, (sized) => upload.uploadPart(partNumber, sized)).catch(noSuchUpload);
  await recordPart(db, uploadId, { partNumber, etag: md5, r2Etag: part.etag, size: body.length });
  return new Response(null, { status: 200, headers: { etag: quote(md5) } });
}

/** CompleteMultipartUpload: the listed parts, as recorded, made one object, if it fits the quota. */
export async function completeMultipartUpload(call: ObjectCall): Promise<Response> {
  const { request, db, bucket, name, key, storedKey, url } = call;
  const uploadId = uploadIdOf(call);
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
  const replaced = await bucket.head(storedKey);
  await assertFits(db, name, { bytes: 0, objects: replaced ? 0 : 1 });
  const object = await bucket.resumeMultipartUpload(storedKey, uploadId).complete(stored).catch(noSuchUpload);
  await adjustUsage(db, name, { bytes: object.size - (replaced?.size ?? 0), objects: replaced ? 0 : 1 });
  await forgetUpload(db, uploadId);
  return xml(
    `<CompleteMultipartUploadResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Location>${xmlEscape(`${url.origin}${url.pathname}`)}</Location><Bucket>${xmlEscape(name)}</Bucket><Key>${xmlEscape(key)}</Key><ETag>${xmlEscape(quote(object.etag))}</ETag></CompleteMultipartUploadResult>`,
  );
}

/** AbortMultipartUpload: R2 drops the parts, and their rows (and quota) go. */
export async function abortMultipartUpload(call: ObjectCall): Promise<Response> {
  const uploadId = uploadIdOf(call);
  await call.bucket.resumeMultipartUpload(call.storedKey, uploadId).abort().catch(noSuchUpload);
  await forgetUpload(call.db, uploadId);
  return new Response(null, { status: 204 });
}

/** ListParts: the parts of one of the job's uploads in progress, paged by part number. */
export async function listParts(call: ObjectCall): Promise<Response> {
  const { db, name, key, url } = call;
  const uploadId = uploadIdOf(call);
  const marker = countParam(url, "part-number-marker", 0, 10_000);
  const max = countParam(url, "max-parts", 1000, 1000);
  const listed = await storedParts(db, name, key, uploadId, { marker, max });
  if (!listed) throw noSuchUploadError();
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
