import { storageDirectories } from "../credentials";
import { xml } from "../responses";
import { xmlEscape } from "../xml";
import type { BucketCall, ServiceCall } from "./call";

/** ListBuckets: a job sees its own bucket, a provider's manual pair the buckets of its active jobs, a user those of the jobs they may act on. */
export async function listBuckets({ db, access }: ServiceCall): Promise<Response> {
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

/** HeadBucket: the bucket exists (the caller reaches it) in R2's one region. */
export async function headBucket(_call: BucketCall): Promise<Response> {
  return new Response(null, { status: 200, headers: { "x-amz-bucket-region": "auto" } });
}

/** GetBucketLocation: R2's one region. */
export async function getBucketLocation(_call: BucketCall): Promise<Response> {
  return xml(`<LocationConstraint xmlns="http://s3.amazonaws.com/doc/2006-03-01/">auto</LocationConstraint>`);
}
