// The storage endpoint's bounds over real HTTP (issue 12): objects never run in the service's
// origin (nosniff, a CSP sandbox, a forced download for sessions and API keys), the per-job
// quota (S3's QuotaExceeded, nothing stored), credentials only for jobs that can run, and
// multipart uploads left open by an ended job aborted.
import {
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
} from "@aws-sdk/client-s3";
import { getSignedUrl } from "@aws-sdk/s3-request-presigner";
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { attachmentDisposition } from "../../edge/storage/download-headers";
import { createUserWithKey, setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";

let t: TestStack;
let admin: { key: string; cookie: string };

interface Creds {
  access_key_id: string;
  secret_access_key: string;
  endpoint_url: string;
}
const clientOf = (creds: Creds) =>
  new S3Client({
    endpoint: creds.endpoint_url,
    forcePathStyle: true,
    region: "auto",
    credentials: { accessKeyId: creds.access_key_id, secretAccessKey: creds.secret_access_key },
    maxAttempts: 1,
    expectContinueHeader: false,
  });

async function submitJob(body: Record<string, unknown> = { config_name: "gpu", target: "local" }): Promise<string> {
  const reply = await t.call("POST", "/api/queue/submit", { json: body, auth: { key: admin.key } });
  expect(reply.body.status).toBe("queued");
  return reply.body.job_id;
}
async function jobWithCredentials(): Promise<{ job: string; s3: S3Client }> {
  const job = await submitJob();
  const issued = await t.call("POST", `/api/queue/${job}/storage-credentials`, { auth: { key: admin.key } });
  expect(issued.status).toBe(201);
  return { job, s3: clientOf(issued.body) };
}
async function s3Error(promise: Promise<unknown>): Promise<{ code: string; status: number; message: string }> {
  try {
    await promise;
  } catch (error: any) {
    return { code: error.name ?? error.Code, status: error.$metadata?.httpStatusCode, message: error.message };
  }
  throw new Error("expected an S3 error");
}
const keysOf = async (s3: S3Client, job: string) =>
  ((await s3.send(new ListObjectsV2Command({ Bucket: job }))).Contents ?? []).map((o) => o.Key);
const setQuota = (body: Record<string, unknown>, key = admin.key) =>
  t.call("PUT", "/api/admin/storage-quota", { json: body, auth: { key } });

beforeAll(async () => {
  t = await startTestStack();
  admin = await setUpAdmin(t);
  expect((await t.call("POST", "/api/configs/environments", { json: { name: "gpu" }, auth: { key: admin.key } })).status).toBe(201);
});
afterAll(async () => {
  await t?.stop();
});

describe("objects never run in the service's origin", () => {
  const HTML = "<html><body><script>fetch('/api/users', {method: 'POST'})</script></body></html>";
  let job: string;
  let s3: S3Client;
  beforeAll(async () => {
    ({ job, s3 } = await jobWithCredentials());
    await s3.send(new PutObjectCommand({ Bucket: job, Key: "samples/report.html", Body: HTML, ContentType: "text/html" }));
    await s3.send(
      new PutObjectCommand({ Bucket: job, Key: "samples/shown.png", Body: "png", ContentType: "image/png", ContentDisposition: "inline" }),
    );
  });

  it("serves a session download of HTML as an attachment with nosniff and a CSP sandbox, also ranged and on HEAD", async () => {
    for (const auth of [{ cookie: admin.cookie }, { key: admin.key }]) {
      const got = await t.call("GET", `/api/cloud/storage/${job}/samples/report.html`, { auth });
      expect(got.status).toBe(200);
      expect(got.text).toBe(HTML);
      expect(got.headers.get("x-content-type-options")).toBe("nosniff");
      expect(got.headers.get("content-security-policy")).toBe("sandbox; default-src 'none'");
      expect(got.headers.get("content-disposition")).toBe(`attachment; filename="report.html"; filename*=UTF-8''report.html`);
    }
    const ranged = await t.call("GET", `/api/cloud/storage/${job}/samples/report.html`, {
      auth: { cookie: admin.cookie },
      headers: { range: "bytes=0-5" },
    });
    expect(ranged.status).toBe(206);
    expect(ranged.text).toBe("<html>");
    const head = await fetch(`${t.base}/api/cloud/storage/${job}/samples/report.html`, {
      method: "HEAD",
      headers: { cookie: admin.cookie },
    });
    expect([
      head.status,
      head.headers.get("x-content-type-options"),
      head.headers.get("content-security-policy"),
      head.headers.get("content-disposition")?.startsWith("attachment;"),
    ]).toEqual([200, "nosniff", "sandbox; default-src 'none'", true]);
    // Stored inline by the job, it is still a download for a user.
    const png = await t.call("GET", `/api/cloud/storage/${job}/samples/shown.png`, { auth: { cookie: admin.cookie } });
    expect(png.headers.get("content-disposition")).toMatch(/^attachment; filename="shown.png"/);
  });

  it("keeps the object's own disposition for S3 tools (SigV4 reads), with nosniff and the sandbox", async () => {
    const html = await s3.send(new GetObjectCommand({ Bucket: job, Key: "samples/report.html" }));
    expect(html.ContentDisposition).toBeUndefined();
    expect(await html.Body!.transformToString()).toBe(HTML);
    const png = await s3.send(new HeadObjectCommand({ Bucket: job, Key: "samples/shown.png" }));
    expect(png.ContentDisposition).toBe("inline");
    // A presigned URL is a SigV4 read too: what a browser opening a shared link gets.
    const url = await getSignedUrl(s3, new GetObjectCommand({ Bucket: job, Key: "samples/report.html" }), { expiresIn: 60 });
    const presigned = await fetch(url);
    expect(await presigned.text()).toBe(HTML);
    expect([
      presigned.headers.get("x-content-type-options"),
      presigned.headers.get("content-security-policy"),
      presigned.headers.get("content-disposition"),
    ]).toEqual(["nosniff", "sandbox; default-src 'none'", null]);
  });

  it("names the download safely whatever the key (pure)", () => {
    expect(attachmentDisposition('a/we"ird\\näme.html')).toBe(
      `attachment; filename="we_ird_n_me.html"; filename*=UTF-8''we%22ird%5Cn%C3%A4me.html`,
    );
    expect(attachmentDisposition("dir/")).toBe(`attachment; filename="download"; filename*=UTF-8''download`);
  });
});

describe("the per-job storage quota", () => {
  afterAll(async () => {
    expect((await setQuota({ max_bytes: 50 * 1024 ** 3, max_objects: 100_000 })).status).toBe(200);
  });

  it("has README defaults, is admin-only to read and set, and refuses a bad value naming it", async () => {
    expect((await t.call("GET", "/api/admin/storage-quota", { auth: { key: admin.key } })).body).toEqual({
      max_bytes: 53_687_091_200,
      max_objects: 100_000,
    });
    const lead = await createUserWithKey(t, { cookie: admin.cookie }, "lead");
    expect((await setQuota({ max_bytes: 1 }, lead.key)).status).toBe(403);
    const bad = await setQuota({ max_bytes: -1 });
    expect(bad.status).toBe(422);
    expect(bad.text).toContain("max_bytes");
    expect((await t.call("GET", "/api/admin/storage-quota", { auth: { key: admin.key } })).body.max_bytes).toBe(53_687_091_200);
    // Changes are audited, with what they replaced.
    expect((await setQuota({ max_objects: 5000 })).body).toEqual({ max_bytes: 53_687_091_200, max_objects: 5000 });
    for (const deadline = Date.now() + 5000; ; await new Promise((r) => setTimeout(r, 50))) {
      const entries = (await t.call("GET", "/api/audit?event_type=storage_quota_changed", { auth: { key: admin.key } })).body.entries;
      if (entries.length) {
        expect(entries[0]).toMatchObject({
          actor: "admin",
          target: "storage_quota",
          details: { before: { max_objects: 100_000 }, after: { max_objects: 5000 } },
        });
        break;
      }
      if (Date.now() > deadline) throw new Error("no storage_quota_changed audit entry");
    }
  });

  it("refuses a PUT that would pass the bytes quota with QuotaExceeded, storing nothing; one that fits is stored", async () => {
    const { job, s3 } = await jobWithCredentials();
    expect((await setQuota({ max_bytes: 1000, max_objects: 100 })).body).toEqual({ max_bytes: 1000, max_objects: 100 });
    await s3.send(new PutObjectCommand({ Bucket: job, Key: "fits.bin", Body: randomBytes(600) }));
    const refused = await s3Error(s3.send(new PutObjectCommand({ Bucket: job, Key: "too-much.bin", Body: randomBytes(500) })));
    expect(refused).toMatchObject({ code: "QuotaExceeded", status: 403 });
    expect(refused.message).toBe(
      `The job's storage quota is full: job ${job} keeps 600 of its 1000 bytes and this upload adds 500. Delete objects it no longer needs, or ask an admin to raise the quota (PUT /api/admin/storage-quota).`,
    );
    expect(await keysOf(s3, job)).toEqual(["fits.bin"]);
    // Replacing an object counts its new size, not both.
    await s3.send(new PutObjectCommand({ Bucket: job, Key: "fits.bin", Body: randomBytes(900) }));
    // Deleting frees the room again.
    await s3.send(new DeleteObjectCommand({ Bucket: job, Key: "fits.bin" }));
    await s3.send(new PutObjectCommand({ Bucket: job, Key: "after-delete.bin", Body: randomBytes(1000) }));
    expect(await keysOf(s3, job)).toEqual(["after-delete.bin"]);
  });

  it("refuses a new object past the objects quota, still replacing an existing one", async () => {
    const { job, s3 } = await jobWithCredentials();
    expect((await setQuota({ max_bytes: 1_000_000, max_objects: 2 })).status).toBe(200);
    await s3.send(new PutObjectCommand({ Bucket: job, Key: "a.txt", Body: "a" }));
    await s3.send(new PutObjectCommand({ Bucket: job, Key: "b.txt", Body: "b" }));
    const refused = await s3Error(s3.send(new PutObjectCommand({ Bucket: job, Key: "c.txt", Body: "c" })));
    expect(refused).toMatchObject({ code: "QuotaExceeded", status: 403 });
    expect(refused.message).toContain(`job ${job} keeps 2 of its 2 objects`);
    expect(await s3Error(s3.send(new CreateMultipartUploadCommand({ Bucket: job, Key: "c.bin" })))).toMatchObject({
      code: "QuotaExceeded",
      status: 403,
    });
    await s3.send(new PutObjectCommand({ Bucket: job, Key: "b.txt", Body: "b2" }));
    expect(await keysOf(s3, job)).toEqual(["a.txt", "b.txt"]);
  });

  it("counts multipart parts as they are stored: a part past the quota is refused and the upload can still complete", async () => {
    const { job, s3 } = await jobWithCredentials();
    const part = randomBytes(5 * 1024 * 1024);
    expect((await setQuota({ max_bytes: part.length + 1000, max_objects: 10 })).status).toBe(200);
    const upload = await s3.send(new CreateMultipartUploadCommand({ Bucket: job, Key: "big.bin" }));
    const first = await s3.send(
      new UploadPartCommand({ Bucket: job, Key: "big.bin", UploadId: upload.UploadId, PartNumber: 1, Body: part }),
    );
    expect(
      await s3Error(
        s3.send(new UploadPartCommand({ Bucket: job, Key: "big.bin", UploadId: upload.UploadId, PartNumber: 2, Body: randomBytes(2000) })),
      ),
    ).toMatchObject({ code: "QuotaExceeded", status: 403 });
    // The parts in progress count for single PUTs too.
    expect(await s3Error(s3.send(new PutObjectCommand({ Bucket: job, Key: "small.bin", Body: randomBytes(2000) })))).toMatchObject({
      code: "QuotaExceeded",
      status: 403,
    });
    const last = await s3.send(
      new UploadPartCommand({ Bucket: job, Key: "big.bin", UploadId: upload.UploadId, PartNumber: 2, Body: randomBytes(900) }),
    );
    await s3.send(
      new CompleteMultipartUploadCommand({
        Bucket: job,
        Key: "big.bin",
        UploadId: upload.UploadId,
        MultipartUpload: {
          Parts: [
            { PartNumber: 1, ETag: first.ETag },
            { PartNumber: 2, ETag: last.ETag },
          ],
        },
      }),
    );
    expect((await s3.send(new HeadObjectCommand({ Bucket: job, Key: "big.bin" }))).ContentLength).toBe(part.length + 900);
    expect(await keysOf(s3, job)).toEqual(["big.bin"]);
    expect(await s3Error(s3.send(new PutObjectCommand({ Bucket: job, Key: "more.bin", Body: randomBytes(200) })))).toMatchObject({
      code: "QuotaExceeded",
      status: 403,
    });
  });
});

describe("credentials and the job's life", () => {
  it("are refused to a job that can never run as configured, creating no bucket", async () => {
    // No worker is registered: a worker-only job has nowhere to run.
    const job = await submitJob({ config_name: "gpu", target: "worker" });
    const queued = await t.call("GET", `/api/queue/position/${job}`, { auth: { key: admin.key } });
    expect(queued.body.wait_reason).toBe("no_matching_worker");
    const refused = await t.call("POST", `/api/queue/${job}/storage-credentials`, { auth: { key: admin.key } });
    expect(refused.status).toBe(409);
    expect(refused.body.code).toBe("job_cannot_run");
    expect(refused.body.detail).toMatch(
      new RegExp(
        `^Job ${job} cannot run as configured \\(no_matching_worker: no online worker has at least 1 GPU\\(s\\)\\), so it gets no storage credentials`,
      ),
    );
    const buckets = await t.call("GET", "/api/cloud/storage", { auth: { key: admin.key } });
    expect(buckets.text).not.toContain(`<Name>${job}</Name>`);
    expect((await t.call("GET", `/api/cloud/storage/${job}?list-type=2`, { auth: { key: admin.key } })).text).toContain(
      "<Code>NoSuchBucket</Code>",
    );
  });

  it("aborts the multipart uploads a job left open when it ends, freeing their parts", async () => {
    const { job, s3 } = await jobWithCredentials();
    const upload = await s3.send(new CreateMultipartUploadCommand({ Bucket: job, Key: "unfinished.bin" }));
    await s3.send(
      new UploadPartCommand({
        Bucket: job,
        Key: "unfinished.bin",
        UploadId: upload.UploadId,
        PartNumber: 1,
        Body: randomBytes(5 * 1024 * 1024),
      }),
    );
    const listing = () => t.call("GET", `/api/cloud/storage/${job}?uploads`, { auth: { key: admin.key } });
    expect((await listing()).text).toContain(`<UploadId>${upload.UploadId}</UploadId>`);
    expect((await t.call("POST", `/api/queue/${job}/cancel`, { auth: { key: admin.key } })).status).toBe(200);
    // On the job's end, or at the latest on the Scheduler's next sweep (5 s).
    const deadline = Date.now() + 15_000;
    while ((await listing()).text.includes("<Upload>") && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    expect((await listing()).text).not.toContain("<Upload>");
    expect((await t.call("GET", `/api/cloud/storage/${job}/unfinished.bin`, { auth: { key: admin.key } })).status).toBe(404);
  });
});
