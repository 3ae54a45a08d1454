import { S3Error } from "./errors";
import { getBucketLocation, headBucket, listBuckets } from "./operations/buckets";
import type { BucketCall, ObjectCall, ServiceCall } from "./operations/call";
import { listMultipartUploads, listObjects } from "./operations/listing";
import { abortMultipartUpload, completeMultipartUpload, createMultipartUpload, listParts, uploadPart } from "./operations/multipart";
import { copyObject, deleteObject, getObject, headObject, putObject } from "./operations/objects";

/*
 * The S3 operations the storage endpoint answers, as a table. A request is addressed to the
 * service (`/`), a bucket (`/{bucket}`) or an object (`/{bucket}/{key}`); within that scope the
 * first rule whose method, query markers and headers match names the operation. A request no rule
 * matches is refused as the scope's `unmatched` says.
 */

/** What a path addresses. */
export type Scope = "service" | "bucket" | "object";

interface Rule<Call> {
  /** S3's name for the operation. */
  operation: string;
  method: "GET" | "HEAD" | "PUT" | "POST" | "DELETE";
  /** Query parameters the request must carry (`?uploads`, `?uploadId=...`). */
  has?: readonly string[];
  /** Query parameters it must not carry. */
  lacks?: readonly string[];
  /** A header it must carry. */
  header?: string;
  run: (call: Call) => Promise<Response>;
}

interface Table<Call> {
  rules: readonly Rule<Call>[];
  /** The refusal of a request no rule matches. */
  unmatched: () => S3Error;
}

const methodNotAllowed = () => new S3Error("MethodNotAllowed", "The specified method is not allowed against this resource.");

/** What each scope's operations are given. */
type CallOf = { service: ServiceCall; bucket: BucketCall; object: ObjectCall };

const OPERATIONS: { [S in Scope]: Table<CallOf[S]> } = {
  service: {
    rules: [{ operation: "ListBuckets", method: "GET", run: listBuckets }],
    unmatched: methodNotAllowed,
  },
  bucket: {
    rules: [
      { operation: "HeadBucket", method: "HEAD", run: headBucket },
      { operation: "GetBucketLocation", method: "GET", has: ["location"], run: getBucketLocation },
      { operation: "ListMultipartUploads", method: "GET", has: ["uploads"], run: listMultipartUploads },
      // A V1 listing (no ?list-type=2) is answered as V2 too.
      { operation: "ListObjectsV2", method: "GET", run: listObjects },
    ],
    unmatched: () => new S3Error("MethodNotAllowed", "Creating or deleting a job's bucket is not allowed: it exists as long as the job."),
  },
  object: {
    rules: [
      { operation: "CreateMultipartUpload", method: "POST", has: ["uploads"], run: createMultipartUpload },
      { operation: "UploadPart", method: "PUT", has: ["uploadId"], run: uploadPart },
      { operation: "CompleteMultipartUpload", method: "POST", has: ["uploadId"], run: completeMultipartUpload },
      { operation: "AbortMultipartUpload", method: "DELETE", has: ["uploadId"], run: abortMultipartUpload },
      { operation: "ListParts", method: "GET", has: ["uploadId"], run: listParts },
      { operation: "CopyObject", method: "PUT", lacks: ["uploadId"], header: "x-amz-copy-source", run: copyObject },
      { operation: "PutObject", method: "PUT", lacks: ["uploadId"], run: putObject },
      { operation: "GetObject", method: "GET", lacks: ["uploadId"], run: getObject },
      { operation: "HeadObject", method: "HEAD", lacks: ["uploadId"], run: headObject },
      { operation: "DeleteObject", method: "DELETE", lacks: ["uploadId"], run: deleteObject },
    ],
    unmatched: methodNotAllowed,
  },
};

/**
 * The rule that answers `request` at `scope`, or null when none does.
 *
 * @example
 * operationFor("object", new Request("https://h/api/cloud/storage/job-1/a.bin?uploads", { method: "POST" }))?.operation; // "CreateMultipartUpload"
 */
export function operationFor<S extends Scope>(scope: S, request: Request): Rule<CallOf[S]> | null {
  const query = new URL(request.url).searchParams;
  const rules = OPERATIONS[scope].rules as readonly Rule<CallOf[S]>[];
  const rule = rules.find(
    (r) =>
      r.method === request.method &&
      (r.has ?? []).every((name) => query.has(name)) &&
      !(r.lacks ?? []).some((name) => query.has(name)) &&
      (r.header === undefined || request.headers.has(r.header)),
  );
  return rule ?? null;
}

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

/** Throws NotImplemented when `url` asks for a subresource of a bucket or object that this endpoint does not keep. */
export function refuseUnsupported(url: URL): void {
  const unsupported = UNSUPPORTED_SUBRESOURCES.find((name) => url.searchParams.has(name));
  if (unsupported) throw new S3Error("NotImplemented", `The ?${unsupported} subresource is not supported by this endpoint.`);
}

/**
 * Answers `call` at `scope` with the operation its request names, or the scope's refusal.
 *
 * @example
 * return await runOperation("bucket", { request, url, db, access, bucket, name, outputRoot });
 */
export async function runOperation<S extends Scope>(scope: S, call: CallOf[S]): Promise<Response> {
  const rule = operationFor(scope, call.request);
  if (!rule) throw OPERATIONS[scope].unmatched();
  return await rule.run(call);
}
