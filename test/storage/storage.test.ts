// The S3-compatible storage endpoint over real HTTP, driven by the real AWS SDK v3 client: a job's
// credentials, objects byte-exact (single, aws-chunked stream and multipart), ranges, listing,
// presigned URLs, and every refusal as S3 XML with nothing written.
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListBucketsCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  ListPartsCommand,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
} from "@aws-sdk/client-s3";
import { createClient } from "@libsql/client";
import { connect } from "node:net";
import { crc32 } from "node:zlib";
import { join } from "node:path";
import { Sha256 } from "@aws-crypto/sha256-js";
import { SignatureV4 } from "@smithy/signature-v4";
import { createHash, randomBytes } from "node:crypto";
import { Readable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { storagePattern, storageTarget } from "../../edge/storage/endpoint";
import { createUserWithKey, setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";

let t: TestStack;
let admin: { key: string; cookie: string };
let job: string;
let other: string;
let creds: { access_key_id: string; secret_access_key: string; endpoint_url: string; bucket: string };

/** A SigV4 signer with the job's credentials, as an S3 client signs (path-style, region auto). */
const jobSigner = () =>
  new SignatureV4({
    credentials: { accessKeyId: creds.access_key_id, secretAccessKey: creds.secret_access_key },
    region: "auto",
    service: "s3",
    sha256: Sha256,
    uriEscapePath: false,
  });

/**
 * The headers of a request to `url` signed with the job's credentials as the S3 SDKs sign one:
 * `headers` beside `host`, the query and, where given, the body signed too; `path` the raw path
 * when it must be signed as sent (url.pathname is normalised).
 */
async function signedHeaders(
  method: string,
  url: URL,
  headers: Record<string, string>,
  options: { query?: Record<string, string>; body?: string; path?: string } = {},
): Promise<Record<string, string>> {
  const signed = await jobSigner().sign({
    method,
    protocol: url.protocol,
    hostname: url.hostname,
    port: Number(url.port),
    path: options.path ?? url.pathname,
    query: options.query ?? {},
    headers: { host: url.host, ...headers },
    ...(options.body === undefined ? {} : { body: options.body }),
  });
  return signed.headers as Record<string, string>;
}

const client = (secret = creds.secret_access_key, accessKeyId = creds.access_key_id) =>
  // expectContinueHeader: false because workerd, locally, never answers `Expect: 100-continue`
  // (the client would wait its timeout before each large body; README "Storage endpoint").
  new S3Client({
    endpoint: creds.endpoint_url,
    forcePathStyle: true,
    region: "auto",
    credentials: { accessKeyId, secretAccessKey: secret },
    maxAttempts: 1,
    expectContinueHeader: false,
  });
const md5 = (data: Buffer) => `"${createHash("md5").update(data).digest("hex")}"`;
const bytesOf = async (body: any) => Buffer.from(await body.transformToByteArray());

async function submitJob(name: string): Promise<string> {
  const reply = await t.call("POST", "/api/queue/submit", { json: { config_name: name, target: "local" }, auth: { key: admin.key } });
  expect(reply.body.status).toBe("queued");
  return reply.body.job_id;
}
async function s3Error(promise: Promise<unknown>): Promise<{ code: string; status: number }> {
  try {
    await promise;
  } catch (error: any) {
    return { code: error.name ?? error.Code, status: error.$metadata?.httpStatusCode };
  }
  throw new Error("expected an S3 error");
}

beforeAll(async () => {
  t = await startTestStack();
  admin = await setUpAdmin(t);
  expect((await t.call("POST", "/api/configs/environments", { json: { name: "gpu" }, auth: { key: admin.key } })).status).toBe(201);
  // No GPU box is registered: the jobs stay pending, which is active.
  job = await submitJob("gpu");
  other = await submitJob("gpu");
  const issued = await t.call("POST", `/api/queue/${job}/storage-credentials`, { auth: { key: admin.key } });
  expect(issued.status).toBe(201);
  creds = issued.body;
});
afterAll(async () => {
  await t?.stop();
});

describe("credentials", () => {
  it("are issued for an active job, with the endpoint and the job's bucket", () => {
    expect(creds).toMatchObject({ job_id: job, bucket: job, region: "auto", endpoint_url: `${t.base}/api/cloud/storage` });
    expect(creds.access_key_id).toMatch(/^STU[A-Z0-9]{20}$/);
    expect(creds.secret_access_key.length).toBeGreaterThanOrEqual(40);
  });

  it("are issued only to the job's owner (or a lead or admin), and a refusal changes nothing", async () => {
    const researcher = await createUserWithKey(t, { cookie: admin.cookie }, "researcher", "rita");
    const refused = await t.call("POST", `/api/queue/${job}/storage-credentials`, { auth: { key: researcher.key } });
    expect(refused.status).toBe(403);
    expect(refused.body.code).toBe("forbidden");
    await client().send(new HeadBucketCommand({ Bucket: job }));
  });

  it("are refused for an unknown job and need a credential", async () => {
    expect((await t.call("POST", "/api/queue/nope/storage-credentials", { auth: { key: admin.key } })).status).toBe(404);
    expect((await t.call("POST", `/api/queue/${job}/storage-credentials`)).status).toBe(401);
  });
});

describe("objects through the AWS SDK", () => {
  it("puts and gets a small object byte-exact with S3's MD5 ETag, and heads it", async () => {
    const data = randomBytes(200_000);
    const put = await client().send(new PutObjectCommand({ Bucket: job, Key: "checkpoints/step-1/model.bin", Body: data }));
    expect(put.ETag).toBe(md5(data));
    const got = await client().send(new GetObjectCommand({ Bucket: job, Key: "checkpoints/step-1/model.bin" }));
    expect((await bytesOf(got.Body)).equals(data)).toBe(true);
    expect(got.ETag).toBe(md5(data));
    const head = await client().send(new HeadObjectCommand({ Bucket: job, Key: "checkpoints/step-1/model.bin" }));
    expect(head.ContentLength).toBe(data.length);
  });

  it("decodes an aws-chunked stream upload (checksum trailer) and stores exactly the bytes", async () => {
    const data = randomBytes(300_000);
    await client().send(
      new PutObjectCommand({
        Bucket: job,
        Key: "streamed.bin",
        Body: Readable.from([data.subarray(0, 100_000), data.subarray(100_000)]),
        ContentLength: data.length,
      }),
    );
    const got = await client().send(new GetObjectCommand({ Bucket: job, Key: "streamed.bin" }));
    expect((await bytesOf(got.Body)).equals(data)).toBe(true);
  });

  it("serves byte ranges", async () => {
    const data = Buffer.from("0123456789abcdefghij");
    await client().send(new PutObjectCommand({ Bucket: job, Key: "range.txt", Body: data }));
    const got = await client().send(new GetObjectCommand({ Bucket: job, Key: "range.txt", Range: "bytes=5-9" }));
    expect((await bytesOf(got.Body)).toString()).toBe("56789");
    expect(got.ContentRange).toBe("bytes 5-9/20");
    const tail = await client().send(new GetObjectCommand({ Bucket: job, Key: "range.txt", Range: "bytes=-3" }));
    expect((await bytesOf(tail.Body)).toString()).toBe("hij");
  });

  it("lists with prefix, delimiter and pagination, and lists only the job's bucket", async () => {
    for (const key of ["logs/a.txt", "logs/b.txt", "logs/c.txt", "logs/deep/d.txt"])
      await client().send(new PutObjectCommand({ Bucket: job, Key: key, Body: key }));
    const first = await client().send(new ListObjectsV2Command({ Bucket: job, Prefix: "logs/", MaxKeys: 2 }));
    expect(first.Contents!.map((o) => o.Key)).toEqual(["logs/a.txt", "logs/b.txt"]);
    expect(first.IsTruncated).toBe(true);
    const second = await client().send(
      new ListObjectsV2Command({ Bucket: job, Prefix: "logs/", MaxKeys: 10, ContinuationToken: first.NextContinuationToken }),
    );
    expect(second.Contents!.map((o) => o.Key)).toEqual(["logs/c.txt", "logs/deep/d.txt"]);
    const folders = await client().send(new ListObjectsV2Command({ Bucket: job, Prefix: "logs/", Delimiter: "/" }));
    expect(folders.Contents!.map((o) => o.Key)).toEqual(["logs/a.txt", "logs/b.txt", "logs/c.txt"]);
    expect(folders.CommonPrefixes!.map((p) => p.Prefix)).toEqual(["logs/deep/"]);
    const buckets = await client().send(new ListBucketsCommand({}));
    expect(buckets.Buckets!.map((b) => b.Name)).toEqual([job]);
    await client().send(new HeadBucketCommand({ Bucket: job }));
    await client().send(new DeleteObjectCommand({ Bucket: job, Key: "logs/c.txt" }));
    expect((await client().send(new ListObjectsV2Command({ Bucket: job, Prefix: "logs/c" }))).KeyCount).toBe(0);
  });

  it("uploads 100 MiB as multipart and gives it back byte-exact", async () => {
    const partSize = 8 * 1024 * 1024;
    const total = 100 * 1024 * 1024;
    const data = randomBytes(total);
    const created = await client().send(new CreateMultipartUploadCommand({ Bucket: job, Key: "final/model.safetensors" }));
    const parts: { PartNumber: number; ETag: string }[] = [];
    for (let offset = 0, n = 1; offset < total; offset += partSize, n++) {
      const part = await client().send(
        new UploadPartCommand({
          Bucket: job,
          Key: "final/model.safetensors",
          UploadId: created.UploadId,
          PartNumber: n,
          Body: data.subarray(offset, offset + partSize),
        }),
      );
      parts.push({ PartNumber: n, ETag: part.ETag! });
    }
    const done = await client().send(
      new CompleteMultipartUploadCommand({
        Bucket: job,
        Key: "final/model.safetensors",
        UploadId: created.UploadId,
        MultipartUpload: { Parts: parts },
      }),
    );
    expect(done.ETag).toMatch(new RegExp(`-${parts.length}"$`));
    const got = await client().send(new GetObjectCommand({ Bucket: job, Key: "final/model.safetensors" }));
    const hash = createHash("sha256");
    for await (const chunk of got.Body as AsyncIterable<Uint8Array>) hash.update(chunk);
    expect(hash.digest("hex")).toBe(createHash("sha256").update(data).digest("hex"));
  }, 120_000);

  it("answers a presigned GET, and refuses it once expired", async () => {
    const signer = jobSigner();
    const url = new URL(`${creds.endpoint_url}/${job}/range.txt`);
    // As @aws-sdk/s3-request-presigner does: the payload is UNSIGNED-PAYLOAD, and that header stays out of the URL.
    const request = {
      method: "GET",
      protocol: "http:",
      hostname: url.hostname,
      port: Number(url.port),
      path: url.pathname,
      headers: { host: url.host, "x-amz-content-sha256": "UNSIGNED-PAYLOAD" },
      query: {},
    };
    const options = { unhoistableHeaders: new Set(["x-amz-content-sha256"]), unsignableHeaders: new Set(["x-amz-content-sha256"]) };
    const presigned = await signer.presign(request, { expiresIn: 60, ...options });
    const query = new URLSearchParams(presigned.query as Record<string, string>).toString();
    const ok = await fetch(`${url.origin}${url.pathname}?${query}`);
    expect(ok.status).toBe(200);
    expect(await ok.text()).toBe("0123456789abcdefghij");
    const old = await signer.presign(request, { expiresIn: 1, signingDate: new Date(Date.now() - 10_000), ...options });
    const expired = await fetch(`${url.origin}${url.pathname}?${new URLSearchParams(old.query as Record<string, string>).toString()}`);
    expect(expired.status).toBe(403);
    expect(await expired.text()).toContain("<Code>AccessDenied</Code>");
  });
});

describe("multipart uploads in progress", () => {
  it("are listed with their parts (paged), so an interrupted upload resumes from what was stored", async () => {
    const key = "resume/model.bin";
    const first = randomBytes(5 * 1024 * 1024);
    const second = randomBytes(3000);
    const created = await client().send(new CreateMultipartUploadCommand({ Bucket: job, Key: key }));
    const other = await client().send(new CreateMultipartUploadCommand({ Bucket: job, Key: "resume/other.bin" }));
    // A part's ETag is its MD5, as S3 gives it.
    expect(
      (await client().send(new UploadPartCommand({ Bucket: job, Key: key, UploadId: created.UploadId, PartNumber: 1, Body: first }))).ETag,
    ).toBe(md5(first));
    await client().send(new UploadPartCommand({ Bucket: job, Key: key, UploadId: created.UploadId, PartNumber: 2, Body: randomBytes(10) }));
    // Part 2 sent again (a retry): the later one counts, as in S3.
    await client().send(new UploadPartCommand({ Bucket: job, Key: key, UploadId: created.UploadId, PartNumber: 2, Body: second }));

    const uploads = await client().send(new ListMultipartUploadsCommand({ Bucket: job, Prefix: "resume/" }));
    expect(uploads.Uploads?.map((u) => [u.Key, u.UploadId])).toEqual([
      ["resume/model.bin", created.UploadId],
      ["resume/other.bin", other.UploadId],
    ]);
    const paged = await client().send(new ListMultipartUploadsCommand({ Bucket: job, Prefix: "resume/", MaxUploads: 1 }));
    expect(paged).toMatchObject({ IsTruncated: true, NextKeyMarker: key, NextUploadIdMarker: created.UploadId });
    const rest = await client().send(
      new ListMultipartUploadsCommand({
        Bucket: job,
        Prefix: "resume/",
        KeyMarker: paged.NextKeyMarker,
        UploadIdMarker: paged.NextUploadIdMarker,
      }),
    );
    expect(rest.Uploads?.map((u) => u.Key)).toEqual(["resume/other.bin"]);

    const page1 = await client().send(new ListPartsCommand({ Bucket: job, Key: key, UploadId: created.UploadId, MaxParts: 1 }));
    expect(page1).toMatchObject({ IsTruncated: true, NextPartNumberMarker: "1" });
    expect(page1.Parts?.map((p) => [p.PartNumber, p.ETag, p.Size])).toEqual([[1, md5(first), first.length]]);
    const page2 = await client().send(
      new ListPartsCommand({ Bucket: job, Key: key, UploadId: created.UploadId, PartNumberMarker: page1.NextPartNumberMarker }),
    );
    expect(page2.IsTruncated).toBe(false);
    expect(page2.Parts?.map((p) => [p.PartNumber, p.ETag, p.Size])).toEqual([[2, md5(second), second.length]]);

    // The client resumes: it completes with the parts the listing gave.
    const parts = [...page1.Parts!, ...page2.Parts!].map((p) => ({ PartNumber: p.PartNumber, ETag: p.ETag }));
    // Completing with an ETag that was never given for that part is refused, and changes nothing.
    const wrong = [parts[0]!, { PartNumber: 2, ETag: md5(Buffer.from("something else")) }];
    expect(
      await s3Error(
        client().send(
          new CompleteMultipartUploadCommand({ Bucket: job, Key: key, UploadId: created.UploadId, MultipartUpload: { Parts: wrong } }),
        ),
      ),
    ).toEqual({ code: "InvalidPart", status: 400 });
    const done = await client().send(
      new CompleteMultipartUploadCommand({ Bucket: job, Key: key, UploadId: created.UploadId, MultipartUpload: { Parts: parts } }),
    );
    // The multipart ETag as S3 computes it: the MD5 of the parts' MD5s, then the count.
    const expected = createHash("md5")
      .update(Buffer.concat([first, second].map((p) => createHash("md5").update(p).digest())))
      .digest("hex");
    expect(done.ETag).toBe(`"${expected}-2"`);
    expect((await client().send(new HeadObjectCommand({ Bucket: job, Key: key }))).ETag).toBe(`"${expected}-2"`);
    const sha = (data: Buffer) => createHash("sha256").update(data).digest("hex");
    const stored = await bytesOf((await client().send(new GetObjectCommand({ Bucket: job, Key: key }))).Body);
    expect([stored.length, sha(stored)]).toEqual([first.length + second.length, sha(Buffer.concat([first, second]))]);
    await client().send(new AbortMultipartUploadCommand({ Bucket: job, Key: "resume/other.bin", UploadId: other.UploadId }));
    expect((await client().send(new ListMultipartUploadsCommand({ Bucket: job, Prefix: "resume/" }))).Uploads ?? []).toEqual([]);
    // A finished upload has no parts to list any more; nor has one that never existed.
    expect(await s3Error(client().send(new ListPartsCommand({ Bucket: job, Key: key, UploadId: created.UploadId })))).toEqual({
      code: "NoSuchUpload",
      status: 404,
    });
    expect(await s3Error(client().send(new ListPartsCommand({ Bucket: job, Key: key, UploadId: "no-such-upload" })))).toEqual({
      code: "NoSuchUpload",
      status: 404,
    });
    await client().send(new DeleteObjectCommand({ Bucket: job, Key: key }));
  });

  it("refuses a part whose body is not the one signed or whose checksum is wrong, keeping the part stored before it", async () => {
    const key = "refused/model.bin";
    // Several MiB, so each body is read and checked in several chunks before the refusal at its end.
    const good = randomBytes(6 * 1024 * 1024 + 123);
    const created = await client().send(new CreateMultipartUploadCommand({ Bucket: job, Key: key }));
    const uploadId = created.UploadId!;
    const stored = await client().send(new UploadPartCommand({ Bucket: job, Key: key, UploadId: uploadId, PartNumber: 1, Body: good }));
    expect(stored.ETag).toBe(md5(good));

    const url = new URL(`${creds.endpoint_url}/${job}/${key}`);
    const sendPart = async (headers: Record<string, string>, body: Uint8Array<ArrayBuffer>) => {
      const query = { partNumber: "1", uploadId };
      const signed = await signedHeaders("PUT", url, { "content-length": String(body.length), ...headers }, { query });
      const answer = await fetch(`${url}?${new URLSearchParams(query)}`, { method: "PUT", headers: signed, body });
      return { status: answer.status, text: await answer.text() };
    };
    const forged = new Uint8Array(good);
    forged[forged.length - 1]! ^= 1; // one bit in the last byte
    const signedHash = createHash("sha256").update(good).digest("hex");
    const mismatch = await sendPart({ "x-amz-content-sha256": signedHash }, forged);
    expect([mismatch.status, mismatch.text.includes("<Code>XAmzContentSHA256Mismatch</Code>")]).toEqual([400, true]);
    // Unsigned, as over HTTPS: the x-amz-checksum-crc32 header is what guards the bytes.
    const crcOfGood = Buffer.alloc(4);
    crcOfGood.writeUInt32BE(crc32(good));
    const badCrc = await sendPart(
      { "x-amz-content-sha256": "UNSIGNED-PAYLOAD", "x-amz-checksum-crc32": crcOfGood.toString("base64") },
      forged,
    );
    expect([badCrc.status, badCrc.text.includes("<Code>BadDigest</Code>")]).toEqual([400, true]);

    // Neither refusal replaced the part stored before: it is listed as it was and completes the object.
    const listed = await client().send(new ListPartsCommand({ Bucket: job, Key: key, UploadId: uploadId }));
    expect(listed.Parts?.map((p) => [p.PartNumber, p.ETag, p.Size])).toEqual([[1, md5(good), good.length]]);
    await client().send(
      new CompleteMultipartUploadCommand({
        Bucket: job,
        Key: key,
        UploadId: uploadId,
        MultipartUpload: { Parts: [{ PartNumber: 1, ETag: stored.ETag }] },
      }),
    );
    const object = await bytesOf((await client().send(new GetObjectCommand({ Bucket: job, Key: key }))).Body);
    expect(object.equals(good)).toBe(true);
    await client().send(new DeleteObjectCommand({ Bucket: job, Key: key }));
  });

  it("refuses a bad max-parts or max-keys with a message", async () => {
    const created = await client().send(new CreateMultipartUploadCommand({ Bucket: job, Key: "bad-list.bin" }));
    const refused = await s3Error(
      client().send(new ListPartsCommand({ Bucket: job, Key: "bad-list.bin", UploadId: created.UploadId, MaxParts: -1 })),
    );
    expect(refused).toEqual({ code: "InvalidArgument", status: 400 });
    expect(await s3Error(client().send(new ListObjectsV2Command({ Bucket: job, MaxKeys: -1 })))).toEqual({
      code: "InvalidArgument",
      status: 400,
    });
    await client().send(new AbortMultipartUploadCommand({ Bucket: job, Key: "bad-list.bin", UploadId: created.UploadId }));
  });
});

describe("a provider's jobs", () => {
  // Until cloud submission exists, a queue entry is made a provider's job the way the cloud
  // tracker will record one: its provider column.
  let cloudJob: string;
  const setProvider = async (settings: Record<string, unknown>) => {
    const reply = await t.call("PUT", "/api/cloud/providers/replicate", { json: settings, auth: { key: admin.key } });
    expect(reply.status).toBe(200);
  };
  beforeAll(async () => {
    cloudJob = await submitJob("gpu");
    const db = createClient({ url: `file:${join(t.dataDir, "service.db")}` });
    await db.execute({ sql: "UPDATE queue_entries SET provider = 'replicate' WHERE job_id = ?", args: [cloudJob] });
    db.close();
  });

  it("get credentials only while the provider's s3_endpoint_enabled is on, with its s3_public_url, and upload under its s3_output_path", async () => {
    const off = await t.call("POST", `/api/queue/${cloudJob}/storage-credentials`, { auth: { key: admin.key } });
    expect(off.status).toBe(409);
    expect(off.body).toMatchObject({ code: "storage_endpoint_disabled" });
    expect(off.body.detail).toContain('PUT /api/cloud/providers/replicate {"s3_endpoint_enabled": true}');

    await setProvider({ s3_endpoint_enabled: true, s3_output_path: "results/cloud", s3_public_url: "https://train.example.com/" });
    const issued = await t.call("POST", `/api/queue/${cloudJob}/storage-credentials`, { auth: { key: admin.key } });
    expect(issued.status).toBe(201);
    expect(issued.body).toMatchObject({ endpoint_url: "https://train.example.com/api/cloud/storage", source: "job" });
    // Here the job reaches the service directly; the signature covers the Host it sends.
    const cloud = (secret = issued.body.secret_access_key) =>
      new S3Client({
        endpoint: creds.endpoint_url,
        forcePathStyle: true,
        region: "auto",
        credentials: { accessKeyId: issued.body.access_key_id, secretAccessKey: secret },
        maxAttempts: 1,
        expectContinueHeader: false,
      });
    await cloud().send(new PutObjectCommand({ Bucket: cloudJob, Key: "out/model.bin", Body: "weights" }));

    const db = createClient({ url: `file:${join(t.dataDir, "service.db")}` });
    const roots = await db.execute({ sql: "SELECT output_root FROM storage_directories WHERE job_id = ?", args: [cloudJob] });
    db.close();
    expect(roots.rows.map((r) => r.output_root)).toEqual(["results/cloud"]);

    // A later change of the output path does not move a running job's directory.
    await setProvider({ s3_output_path: "elsewhere" });
    const rotated = await t.call("POST", `/api/queue/${cloudJob}/storage-credentials`, { auth: { key: admin.key } });
    const again = new S3Client({
      endpoint: creds.endpoint_url,
      forcePathStyle: true,
      region: "auto",
      credentials: { accessKeyId: rotated.body.access_key_id, secretAccessKey: rotated.body.secret_access_key },
      maxAttempts: 1,
      expectContinueHeader: false,
    });
    expect(await bytesOf((await again.send(new GetObjectCommand({ Bucket: cloudJob, Key: "out/model.bin" }))).Body)).toEqual(
      Buffer.from("weights"),
    );
    expect((await t.call("GET", `/api/cloud/storage/${cloudJob}/out/model.bin`, { auth: { key: admin.key } })).text).toBe("weights");

    // Turned off, the provider's jobs are refused at once, and nothing is written.
    await setProvider({ s3_endpoint_enabled: false });
    expect(await s3Error(again.send(new PutObjectCommand({ Bucket: cloudJob, Key: "out/late.bin", Body: "x" })))).toEqual({
      code: "AccessDenied",
      status: 403,
    });
    await setProvider({ s3_endpoint_enabled: true });
    expect((await again.send(new ListObjectsV2Command({ Bucket: cloudJob }))).Contents?.map((o) => o.Key)).toEqual(["out/model.bin"]);
  });

  it("use the provider's manually configured credentials instead of fresh ones, for that provider's active jobs only", async () => {
    const manual = { s3_access_key_id: "MANUALKEY0000000001", s3_secret_access_key: "manual-secret-0123456789" };
    await setProvider({ ...manual, s3_endpoint_enabled: true });
    const issued = await t.call("POST", `/api/queue/${cloudJob}/storage-credentials`, { auth: { key: admin.key } });
    expect(issued.status).toBe(201);
    // The secret is the server's: the caller gets the key id only.
    expect(issued.body).toMatchObject({
      access_key_id: manual.s3_access_key_id,
      secret_access_key: null,
      source: "provider",
      bucket: cloudJob,
    });
    const withManual = (secret = manual.s3_secret_access_key) =>
      new S3Client({
        endpoint: creds.endpoint_url,
        forcePathStyle: true,
        region: "auto",
        credentials: { accessKeyId: manual.s3_access_key_id, secretAccessKey: secret },
        maxAttempts: 1,
        expectContinueHeader: false,
      });
    await withManual().send(new PutObjectCommand({ Bucket: cloudJob, Key: "out/manual.bin", Body: "m" }));
    // Into the job's own directory, beside what its earlier per-job credentials uploaded.
    expect((await withManual().send(new ListObjectsV2Command({ Bucket: cloudJob }))).Contents?.map((o) => o.Key)).toEqual([
      "out/manual.bin",
      "out/model.bin",
    ]);
    expect((await withManual().send(new ListBucketsCommand({}))).Buckets?.map((b) => b.Name)).toEqual([cloudJob]);
    // Not a job of another provider (here: a local one), not with a wrong secret.
    expect(await s3Error(withManual().send(new PutObjectCommand({ Bucket: job, Key: "intruder.bin", Body: "x" })))).toEqual({
      code: "AccessDenied",
      status: 403,
    });
    expect(
      await s3Error(withManual("wrong-secret-0123456789").send(new PutObjectCommand({ Bucket: cloudJob, Key: "x.bin", Body: "x" }))),
    ).toEqual({ code: "SignatureDoesNotMatch", status: 403 });
    // Cleared, the key is unknown again.
    await setProvider({ s3_access_key_id: null, s3_secret_access_key: null });
    expect(await s3Error(withManual().send(new ListObjectsV2Command({ Bucket: cloudJob })))).toEqual({
      code: "InvalidAccessKeyId",
      status: 403,
    });
    expect((await client().send(new ListObjectsV2Command({ Bucket: job, Prefix: "intruder" }))).KeyCount).toBe(0);
  });

  it("jobs on this service's own GPUs need no provider setting", () => {
    // The job of the other tests is a local one: its credentials were issued with every provider setting at its default.
    expect(creds.endpoint_url).toBe(`${t.base}/api/cloud/storage`);
  });
});

describe("users with a session or API key", () => {
  it("admins list every job's bucket and download its results, read-only; others' jobs are refused", async () => {
    const buckets = await t.call("GET", "/api/cloud/storage", { auth: { key: admin.key } });
    expect(buckets.status).toBe(200);
    expect(buckets.text).toContain(`<Name>${job}</Name>`);
    const listed = await t.call("GET", `/api/cloud/storage/${job}?list-type=2&prefix=range`, { auth: { cookie: admin.cookie } });
    expect(listed.text).toContain("<Key>range.txt</Key>");
    const file = await t.call("GET", `/api/cloud/storage/${job}/range.txt`, { auth: { key: admin.key } });
    expect(file.text).toBe("0123456789abcdefghij");
    const write = await t.call("PUT", `/api/cloud/storage/${job}/admin.txt`, { body: "x", auth: { key: admin.key } });
    expect(write.status).toBe(403);
    expect(write.text).toContain("<Code>AccessDenied</Code>");
    const researcher = await createUserWithKey(t, { cookie: admin.cookie }, "researcher");
    const refused = await t.call("GET", `/api/cloud/storage/${job}/range.txt`, { auth: { key: researcher.key } });
    expect(refused.status).toBe(403);
    expect((await t.call("GET", `/api/cloud/storage/${job}/range.txt`)).status).toBe(403);
  });

  it("a researcher reads their own jobs' results, and only theirs, also after the job", async () => {
    const owner = await createUserWithKey(t, { cookie: admin.cookie }, "researcher", "olga");
    const submitted = await t.call("POST", "/api/queue/submit", {
      json: { config_name: "gpu", target: "local" },
      auth: { key: owner.key },
    });
    const own = submitted.body.job_id as string;
    const issued = await t.call("POST", `/api/queue/${own}/storage-credentials`, { auth: { key: owner.key } });
    expect(issued.status).toBe(201);
    const jobClient = new S3Client({
      endpoint: issued.body.endpoint_url,
      forcePathStyle: true,
      region: "auto",
      credentials: { accessKeyId: issued.body.access_key_id, secretAccessKey: issued.body.secret_access_key },
      maxAttempts: 1,
      expectContinueHeader: false,
    });
    await jobClient.send(new PutObjectCommand({ Bucket: own, Key: "samples/final.png", Body: "png bytes" }));
    expect((await t.call("POST", `/api/queue/${own}/cancel`, { auth: { key: owner.key } })).status).toBe(200);

    const buckets = await t.call("GET", "/api/cloud/storage", { auth: { cookie: owner.cookie } });
    expect([...buckets.text.matchAll(/<Name>([^<]+)<\/Name>/g)].map((m) => m[1])).toEqual([own]);
    expect((await t.call("GET", `/api/cloud/storage/${own}?list-type=2`, { auth: { cookie: owner.cookie } })).text).toContain(
      "<Key>samples/final.png</Key>",
    );
    expect((await t.call("GET", `/api/cloud/storage/${own}/samples/final.png`, { auth: { key: owner.key } })).text).toBe("png bytes");
    const theirs = await t.call("GET", `/api/cloud/storage/${job}?list-type=2`, { auth: { key: owner.key } });
    expect(theirs.status).toBe(403);
    expect(theirs.text).toContain("<Code>AccessDenied</Code>");
    expect((await t.call("GET", "/api/cloud/storage/no-such-job?list-type=2", { auth: { key: owner.key } })).text).toContain(
      "<Code>NoSuchBucket</Code>",
    );
  });
});

describe("refusals, with nothing written", () => {
  const absent = async (key: string) => (await client().send(new ListObjectsV2Command({ Bucket: job, Prefix: key }))).KeyCount === 0;

  it("refuses a wrong secret, an unknown key id, and another job's bucket", async () => {
    expect(await s3Error(client("not-the-secret").send(new PutObjectCommand({ Bucket: job, Key: "x1", Body: "x" })))).toEqual({
      code: "SignatureDoesNotMatch",
      status: 403,
    });
    expect(
      await s3Error(client(undefined, "STUNOSUCHKEY0000000000").send(new PutObjectCommand({ Bucket: job, Key: "x2", Body: "x" }))),
    ).toEqual({ code: "InvalidAccessKeyId", status: 403 });
    expect(await s3Error(client().send(new PutObjectCommand({ Bucket: other, Key: "x3", Body: "x" })))).toEqual({
      code: "AccessDenied",
      status: 403,
    });
    expect(await absent("x")).toBe(true);
  });

  it("refuses a body that is not the one signed, and a chunked body whose checksum is wrong", async () => {
    const url = new URL(`${creds.endpoint_url}/${job}/forged.bin`);
    const signedHash = createHash("sha256").update("the signed body").digest("hex");
    const signed = await signedHeaders(
      "PUT",
      url,
      { "x-amz-content-sha256": signedHash, "content-length": "15" },
      { body: "the signed body" },
    );
    const forged = await fetch(url, { method: "PUT", headers: signed, body: "the forged body" });
    expect(forged.status).toBe(400);
    expect(await forged.text()).toContain("<Code>XAmzContentSHA256Mismatch</Code>");

    const payload = "x".repeat(1000);
    const chunked = `${(1000).toString(16)}\r\n${payload}\r\n0\r\nx-amz-checksum-crc32:AAAAAA==\r\n\r\n`;
    const bad = await signedHeaders("PUT", url, {
      "x-amz-content-sha256": "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
      "content-encoding": "aws-chunked",
      "x-amz-decoded-content-length": "1000",
      "x-amz-trailer": "x-amz-checksum-crc32",
      "content-length": String(chunked.length),
    });
    const refused = await fetch(url, { method: "PUT", headers: bad, body: chunked });
    expect(refused.status).toBe(400);
    expect(await refused.text()).toContain("<Code>BadDigest</Code>");
    expect(await absent("forged.bin")).toBe(true);

    // An unsigned payload with a checksum header (what the SDKs send over HTTPS): the header guards the bytes.
    const unsigned = await signedHeaders("PUT", url, {
      "x-amz-content-sha256": "UNSIGNED-PAYLOAD",
      "x-amz-checksum-crc32": "AAAAAA==",
      "content-length": "5",
    });
    const corrupted = await fetch(url, { method: "PUT", headers: unsigned, body: "hello" });
    expect(corrupted.status).toBe(400);
    expect(await corrupted.text()).toContain("<Code>BadDigest</Code>");
    expect(await absent("forged.bin")).toBe(true);
    const right = await signedHeaders("PUT", url, {
      "x-amz-content-sha256": "UNSIGNED-PAYLOAD",
      "x-amz-checksum-crc32": "NhCmhg==",
      "content-length": "5",
    });
    expect((await fetch(url, { method: "PUT", headers: right, body: "hello" })).status).toBe(200);
    await client().send(new DeleteObjectCommand({ Bucket: job, Key: "forged.bin" }));
  });

  it("answers GetBucketLocation, and refuses subresources it does not keep rather than serving the object", async () => {
    const get = async (path: string, query: Record<string, string>) => {
      const url = new URL(`${creds.endpoint_url}/${path}`);
      const signed = await signedHeaders("GET", url, { "x-amz-content-sha256": "UNSIGNED-PAYLOAD" }, { query });
      const response = await fetch(`${url}?${new URLSearchParams(query)}`, { headers: signed });
      return { status: response.status, text: await response.text() };
    };
    const location = await get(job, { location: "" });
    expect(location.status).toBe(200);
    expect(location.text).toContain(">auto</LocationConstraint>");
    for (const [path, query] of [
      [`${job}/range.txt`, "tagging"],
      [`${job}/range.txt`, "acl"],
      [job, "versioning"],
    ] as const) {
      const refused = await get(path, { [query]: "" });
      expect([refused.status, refused.text.includes("<Code>NotImplemented</Code>")], query).toEqual([501, true]);
    }
  });

  it("answers a body that breaks off as the client's error, storing nothing and logging no server error", async () => {
    const url = new URL(`${creds.endpoint_url}/${job}/broken.bin`);
    const signed = await signedHeaders("PUT", url, { "x-amz-content-sha256": "UNSIGNED-PAYLOAD" });
    const head = (framing: string) =>
      `PUT ${url.pathname} HTTP/1.1\r\n${Object.entries(signed)
        .map(([k, v]) => `${k}: ${v}`)
        .join("\r\n")}\r\n${framing}\r\n\r\n`;
    const linesBefore = t.lines.length;
    // Broken HTTP chunking: a chunk size that is not hex. The answer is an S3 error, not a 500.
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = connect(Number(url.port), url.hostname, () =>
        socket.write(head("content-length: 1048576\r\ntransfer-encoding: chunked") + "zz\r\nabc\r\n"),
      );
      let text = "";
      socket.on("data", (data) => (text += data.toString()));
      socket.on("end", () => resolve(text));
      socket.on("error", reject);
      setTimeout(() => socket.end(), 2000);
    });
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    expect(answer).toContain("<Code>IncompleteBody</Code>");
    // A client that goes away after part of its declared body.
    await new Promise<void>((resolve) => {
      const socket = connect(Number(url.port), url.hostname, () => {
        socket.write(head("content-length: 1048576") + "x".repeat(100_000));
        setTimeout(() => (socket.destroy(), resolve()), 300);
      });
    });
    await new Promise((r) => setTimeout(r, 500));
    const errors = t.lines.slice(linesBefore).filter((line) => line.includes('"level":"ERROR"'));
    expect(errors).toEqual([]);
    expect((await client().send(new ListObjectsV2Command({ Bucket: job, Prefix: "broken" }))).KeyCount).toBe(0);
  });

  it("refuses a single PUT over the platform's body limit at once, telling the client to use multipart", async () => {
    const url = new URL(`${creds.endpoint_url}/${job}/huge.bin`);
    const declared = 100 * 1024 * 1024 + 1;
    const signed = await signedHeaders("PUT", url, { "x-amz-content-sha256": "UNSIGNED-PAYLOAD", "content-length": String(declared) });
    // Only the head and a first slice are sent: the answer must come before the body does.
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = connect(Number(url.port), url.hostname, () => {
        socket.write(
          `PUT ${url.pathname} HTTP/1.1\r\n${Object.entries(signed)
            .map(([k, v]) => `${k}: ${v}`)
            .join("\r\n")}\r\n\r\n` + "x".repeat(64 * 1024),
        );
      });
      let text = "";
      socket.on("data", (data) => {
        text += data.toString();
        if (text.includes("</Error>")) {
          socket.destroy();
          resolve(text);
        }
      });
      socket.on("error", reject);
    });
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    expect(answer).toContain("<Code>EntityTooLarge</Code>");
    expect(answer).toContain("upload larger files as multipart");
    expect((await client().send(new ListObjectsV2Command({ Bucket: job, Prefix: "huge" }))).KeyCount).toBe(0);
  });

  it("refuses path tricks in keys", async () => {
    for (const key of ["a/../b", "../escape", "./here", `${"k".repeat(1025)}`]) {
      // Refused by this endpoint (400), or, where the client's URL handling resolves the dots,
      // by the signature no longer matching the path sent (403).
      const refused = await s3Error(client().send(new PutObjectCommand({ Bucket: job, Key: key, Body: "x" })));
      expect([400, 403], key).toContain(refused.status);
    }
    expect(await absent("a/")).toBe(true);
    // Sent raw and signed as sent: encoded slashes and dots that would climb out of the job's
    // directory once decoded, and a key that ends where a climb would start.
    const base = new URL(creds.endpoint_url);
    const putRaw = async (rawKey: string) => {
      const path = `${base.pathname}/${job}/${rawKey}`;
      const signed = await signedHeaders("PUT", base, { "x-amz-content-sha256": "UNSIGNED-PAYLOAD", "content-length": "1" }, { path });
      const answer = await fetch(`${base.origin}${path}`, { method: "PUT", headers: signed, body: "x" });
      return { status: answer.status, text: await answer.text() };
    };
    // Encoded slashes are no separators in a URL: the endpoint decodes the key and refuses the climb.
    for (const rawKey of [`a%2F..%2F..%2F${other}%2Fx`, "sub/..%2Fb", "..%2F..%2Fetc"]) {
      const refused = await putRaw(rawKey);
      expect([refused.status, refused.text.includes("<Code>InvalidArgument</Code>")], rawKey).toEqual([400, true]);
    }
    // Encoded dots are dot segments to URL parsers (the client's and workerd's): the path is
    // resolved before the Worker sees it, no longer matches its signature, or leaves the endpoint.
    for (const rawKey of [`%2E%2E/%2E%2E/${other}/x`, "a/%2e%2e/b"]) {
      expect([403, 404], rawKey).toContain((await putRaw(rawKey)).status);
    }
    expect(await absent("b")).toBe(true);
    expect(await absent("a")).toBe(true);
    expect(await absent("sub")).toBe(true);
  });

  it("stops accepting the job's credentials once it is cancelled", async () => {
    expect((await t.call("POST", `/api/queue/${job}/cancel`, { auth: { key: admin.key } })).status).toBe(200);
    expect(await s3Error(client().send(new PutObjectCommand({ Bucket: job, Key: "late.bin", Body: "x" })))).toEqual({
      code: "ExpiredToken",
      status: 400,
    });
    expect((await t.call("POST", `/api/queue/${job}/storage-credentials`, { auth: { key: admin.key } })).status).toBe(409);
    // The results outlive the job: admins still download them.
    expect((await t.call("GET", `/api/cloud/storage/${job}/range.txt`, { auth: { key: admin.key } })).text).toBe("0123456789abcdefghij");
  });
});

describe("paths (pure)", () => {
  it("labels storage requests by pattern for metrics, never by bucket or key", () => {
    expect(storagePattern("/api/cloud/storage")).toBe("/api/cloud/storage");
    expect(storagePattern("/api/cloud/storage/job-1")).toBe("/api/cloud/storage/{bucket}");
    expect(storagePattern("/api/cloud/storage/job-1/a/b/c.bin")).toBe("/api/cloud/storage/{bucket}/{key}");
    expect(storagePattern("/api/cloud/storagex")).toBeNull();
  });

  it("decodes bucket and key once, and refuses keys that climb or hide", () => {
    expect(storageTarget("/api/cloud/storage/job-1/dir%2Fsub/file%20one.bin")).toEqual({ bucket: "job-1", key: "dir/sub/file one.bin" });
    expect(storageTarget("/api/cloud/storage/job-1")).toEqual({ bucket: "job-1", key: null });
    for (const bad of [
      "/api/cloud/storage/job-1/a%2F..%2Fb",
      "/api/cloud/storage/job-1/%2Fabs",
      "/api/cloud/storage/job-1/%E0%A4%A",
      "/api/cloud/storage/job-1/a%5Cb",
    ]) {
      expect(() => storageTarget(bad), bad).toThrow();
    }
  });
});
