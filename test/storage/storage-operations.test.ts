import { describe, expect, it } from "vitest";
import { S3Error } from "../../edge/storage/errors";
import { operationFor, refuseUnsupported, runOperation, type Scope } from "../../edge/storage/operations";

// The table that names the S3 operation of a storage request (a pure lookup; the operations
// themselves run against the real stack in storage.test.ts and storage-clients.test.ts).

const BASE = "https://service.test/api/cloud/storage/job-1";

function named(scope: Scope, method: string, query = "", headers: Record<string, string> = {}): string | null {
  const path = scope === "service" ? "https://service.test/api/cloud/storage" : scope === "bucket" ? BASE : `${BASE}/out/model.bin`;
  return operationFor(scope, new Request(`${path}${query}`, { method, headers }))?.operation ?? null;
}

async function refusal(scope: Scope, method: string, query = ""): Promise<[string, string]> {
  const request = new Request(`${BASE}/out/model.bin${query}`, { method });
  const error = await runOperation(scope, { request } as never).catch((e: unknown) => e);
  expect(error).toBeInstanceOf(S3Error);
  return [(error as S3Error).code, (error as S3Error).message];
}

describe("storage operation table", () => {
  it("names the service's one operation, ListBuckets, for a GET only", () => {
    expect(named("service", "GET")).toBe("ListBuckets");
    expect(named("service", "GET", "?acl")).toBe("ListBuckets");
    expect(named("service", "HEAD")).toBeNull();
    expect(named("service", "PUT")).toBeNull();
  });

  it("names a bucket's operations by method and query marker", () => {
    expect(named("bucket", "HEAD")).toBe("HeadBucket");
    expect(named("bucket", "HEAD", "?uploads")).toBe("HeadBucket");
    expect(named("bucket", "GET", "?location")).toBe("GetBucketLocation");
    expect(named("bucket", "GET", "?uploads")).toBe("ListMultipartUploads");
    expect(named("bucket", "GET", "?list-type=2&prefix=out/")).toBe("ListObjectsV2");
    expect(named("bucket", "GET")).toBe("ListObjectsV2");
    expect(named("bucket", "PUT")).toBeNull();
    expect(named("bucket", "DELETE")).toBeNull();
    expect(named("bucket", "POST", "?delete")).toBeNull();
  });

  it("names multipart operations by ?uploads and ?uploadId, creation first", () => {
    expect(named("object", "POST", "?uploads")).toBe("CreateMultipartUpload");
    expect(named("object", "POST", "?uploads&uploadId=u1")).toBe("CreateMultipartUpload");
    expect(named("object", "PUT", "?partNumber=1&uploadId=u1")).toBe("UploadPart");
    expect(named("object", "PUT", "?uploadId=u1", { "x-amz-copy-source": "/job-1/a" })).toBe("UploadPart");
    expect(named("object", "POST", "?uploadId=u1")).toBe("CompleteMultipartUpload");
    expect(named("object", "DELETE", "?uploadId=u1")).toBe("AbortMultipartUpload");
    expect(named("object", "GET", "?uploadId=u1")).toBe("ListParts");
    expect(named("object", "HEAD", "?uploadId=u1")).toBeNull();
  });

  it("names object operations, a PUT with x-amz-copy-source as CopyObject", () => {
    expect(named("object", "PUT")).toBe("PutObject");
    expect(named("object", "PUT", "?uploads")).toBe("PutObject");
    expect(named("object", "PUT", "", { "x-amz-copy-source": "/job-1/a" })).toBe("CopyObject");
    expect(named("object", "GET")).toBe("GetObject");
    expect(named("object", "HEAD")).toBe("HeadObject");
    expect(named("object", "DELETE")).toBe("DeleteObject");
    expect(named("object", "POST")).toBeNull();
    expect(named("object", "PATCH")).toBeNull();
  });

  it("refuses an unmatched request with the scope's MethodNotAllowed", async () => {
    expect(await refusal("service", "HEAD")).toEqual(["MethodNotAllowed", "The specified method is not allowed against this resource."]);
    expect(await refusal("bucket", "DELETE")).toEqual([
      "MethodNotAllowed",
      "Creating or deleting a job's bucket is not allowed: it exists as long as the job.",
    ]);
    expect(await refusal("object", "HEAD", "?uploadId=u1")).toEqual([
      "MethodNotAllowed",
      "The specified method is not allowed against this resource.",
    ]);
  });

  it("refuses a subresource it does not keep as NotImplemented", () => {
    expect(() => refuseUnsupported(new URL(`${BASE}/out/model.bin?tagging`))).toThrow(
      new S3Error("NotImplemented", "The ?tagging subresource is not supported by this endpoint."),
    );
    expect(() => refuseUnsupported(new URL(`${BASE}?list-type=2`))).not.toThrow();
  });
});
