import {
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  ListPartsCommand,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
} from "@aws-sdk/client-s3";
import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { createUserWithKey, sessionCookie, setUpAdmin, startTestStack, tempDataDir } from "../helpers/stack";

describe("a restart on the same data directory", () => {
  it("keeps users, sessions, API keys (and their revocation) and settings", async () => {
    const dataDir = tempDataDir();
    const first = await startTestStack(dataDir);
    const admin = await setUpAdmin(first);
    const researcher = await createUserWithKey(first, { key: admin.key }, "researcher", "rita");
    const revoked = (await first.call("POST", "/api/cloud/auth/api-keys", { json: { name: "old" }, auth: { cookie: admin.cookie } })).body;
    await first.call("DELETE", `/api/cloud/auth/api-keys/${revoked.id}`, { auth: { key: admin.key } });
    await first.call("PUT", "/api/cloud/auth/registration", { json: { enabled: true }, auth: { key: admin.key } });
    await first.stop({ keepData: true });

    const second = await startTestStack(dataDir);
    try {
      expect((await second.call("GET", "/api/cloud/auth/setup/status")).body).toEqual({ needs_setup: false, registration_enabled: true });
      expect((await second.call("GET", "/api/users/me", { auth: { key: admin.key } })).body.username).toBe("admin");
      expect((await second.call("GET", "/api/users/me", { auth: { cookie: admin.cookie } })).body.auth_method).toBe("session");
      expect((await second.call("GET", "/api/users/me", { auth: { key: researcher.key } })).body).toMatchObject({
        username: "rita",
        level: "researcher",
      });
      expect((await second.call("GET", "/api/users/me", { auth: { key: revoked.key } })).status).toBe(401);
      const login = await second.call("POST", "/api/cloud/auth/login", { json: { username: "rita", password: "rita-password" } });
      expect(login.status).toBe(200);
      expect(sessionCookie(login)).toMatch(/^st_session=/);
      expect(
        (
          await second.call("POST", "/api/cloud/auth/setup/first-admin", {
            json: { email: "x@example.com", username: "intruder", password: "intruder-pw" },
          })
        ).status,
      ).toBe(409);
    } finally {
      await second.stop();
    }
  });

  it("keeps a job's storage credentials, its stored objects and a multipart upload in progress, which then completes", async () => {
    const dataDir = tempDataDir();
    const first = await startTestStack(dataDir);
    const admin = await setUpAdmin(first);
    await first.call("POST", "/api/configs/environments", { json: { name: "gpu" }, auth: { key: admin.key } });
    const job = (await first.call("POST", "/api/queue/submit", { json: { config_name: "gpu", target: "local" }, auth: { key: admin.key } }))
      .body.job_id as string;
    const creds = (await first.call("POST", `/api/queue/${job}/storage-credentials`, { auth: { key: admin.key } })).body;
    const s3 = (endpoint: string) =>
      new S3Client({
        endpoint,
        forcePathStyle: true,
        region: "auto",
        credentials: { accessKeyId: creds.access_key_id, secretAccessKey: creds.secret_access_key },
        maxAttempts: 1,
        expectContinueHeader: false,
      });
    const part1 = randomBytes(5 * 1024 * 1024);
    const part2 = randomBytes(1000);
    await s3(`${first.base}/api/cloud/storage`).send(new PutObjectCommand({ Bucket: job, Key: "step-1.bin", Body: "checkpoint" }));
    const upload = await s3(`${first.base}/api/cloud/storage`).send(new CreateMultipartUploadCommand({ Bucket: job, Key: "final.bin" }));
    await s3(`${first.base}/api/cloud/storage`).send(
      new UploadPartCommand({ Bucket: job, Key: "final.bin", UploadId: upload.UploadId, PartNumber: 1, Body: part1 }),
    );
    await first.stop({ keepData: true });

    const second = await startTestStack(dataDir);
    try {
      const client = s3(`${second.base}/api/cloud/storage`);
      expect(await (await client.send(new GetObjectCommand({ Bucket: job, Key: "step-1.bin" }))).Body!.transformToString()).toBe(
        "checkpoint",
      );
      const listed = await client.send(new ListPartsCommand({ Bucket: job, Key: "final.bin", UploadId: upload.UploadId }));
      expect(listed.Parts?.map((p) => [p.PartNumber, p.Size])).toEqual([[1, part1.length]]);
      const second2 = await client.send(
        new UploadPartCommand({ Bucket: job, Key: "final.bin", UploadId: upload.UploadId, PartNumber: 2, Body: part2 }),
      );
      await client.send(
        new CompleteMultipartUploadCommand({
          Bucket: job,
          Key: "final.bin",
          UploadId: upload.UploadId,
          MultipartUpload: {
            Parts: [
              { PartNumber: 1, ETag: listed.Parts![0]!.ETag },
              { PartNumber: 2, ETag: second2.ETag },
            ],
          },
        }),
      );
      const stored = Buffer.from(
        await (await client.send(new GetObjectCommand({ Bucket: job, Key: "final.bin" }))).Body!.transformToByteArray(),
      );
      expect(stored.equals(Buffer.concat([part1, part2]))).toBe(true);
    } finally {
      await second.stop();
    }
  }, 60_000);
});
