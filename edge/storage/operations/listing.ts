import type { ObjectListing } from "../../bucket";
import { S3Error } from "../errors";
import { quote, xml } from "../responses";
import { listUploads } from "../uploads";
import { xmlEscape } from "../xml";
import type { BucketCall } from "./call";

const MAX_LIST_KEYS = 1000;

/** A whole-number query parameter from 0 to `max` (S3's max-keys, max-parts, max-uploads, markers), `fallback` when absent. */
export function countParam(url: URL, name: string, fallback: number, max: number): number {
  const raw = url.searchParams.get(name);
  if (raw === null || raw === "") return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 0) throw new S3Error("InvalidArgument", `${name} must be a whole number from 0, not "${raw}".`);
  return Math.min(value, max);
}

/** ListObjectsV2 (a V1 listing is answered the same way): the job's objects under a prefix, paged by R2's cursor. */
export async function listObjects({ bucket, outputRoot, name, url }: BucketCall): Promise<Response> {
  const q = url.searchParams;
  const prefix = q.get("prefix") ?? "";
  const delimiter = q.get("delimiter") ?? undefined;
  const maxKeys = countParam(url, "max-keys", MAX_LIST_KEYS, MAX_LIST_KEYS);
  const token = q.get("continuation-token");
  const startAfter = q.get("start-after");
  const root = `${outputRoot}/${name}/`;
  const listed: ObjectListing =
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

/** ListMultipartUploads: the job's uploads in progress, by key then upload id (prefix and markers; keys in full, no delimiter grouping). */
export async function listMultipartUploads({ db, name, url }: BucketCall): Promise<Response> {
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
