// Storage endpoint throughput: a 1 GiB object uploaded as multipart (8 MiB parts, 4 in flight,
// as the AWS tools do) and downloaded again through the local stack with the AWS SDK v3, next
// to a plain copy of the same file on this disk, with the stack process's memory sampled.
// Target: >= 30 % of the disk copy each way; memory flat (no whole-object buffering).
// A third figure is the local R2 simulator's own ceiling for uploads: the same parts piped by a
// bare Worker straight into R2 (no signature, no checks), in the same Miniflare, on the same box.
import {
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  S3Client,
  UploadPartCommand,
} from "@aws-sdk/client-s3";
import { execFileSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { closeSync, copyFileSync, mkdtempSync, openSync, readFileSync, readSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Miniflare } from "miniflare";
import { COMPATIBILITY_DATE } from "../../edge/local/stack";
import { startBenchStack } from "./lib";

const SIZE = Number(process.env.BENCH_STORAGE_MIB ?? 1024) * 1024 * 1024;
const PART = 8 * 1024 * 1024;
const IN_FLIGHT = 4;
const out = (line: string) => console.log(line);

const dir = mkdtempSync(join(tmpdir(), "storage-bench-"));
const source = join(dir, "object.bin");
// Written in 64 MiB slices of random bytes, so the file itself never sits in memory here.
const slice = randomBytes(64 * 1024 * 1024);
for (let written = 0; written < SIZE; written += slice.length)
  writeFileSync(source, slice.subarray(0, Math.min(slice.length, SIZE - written)), { flag: written ? "a" : "w" });
let t0 = performance.now();
copyFileSync(source, join(dir, "copy.bin"));
execFileSync("sync");
const diskSeconds = (performance.now() - t0) / 1000;
const diskMBs = SIZE / 1e6 / diskSeconds;
out(`disk copy of ${SIZE / 1024 / 1024} MiB (cp + sync): ${diskSeconds.toFixed(2)} s = ${diskMBs.toFixed(0)} MB/s`);

const stack = await startBenchStack();
/** RSS of the stack's processes, by name: the Node host (edge/local/main.ts) and workerd. */
function stackRss(): { host: number; workerd: number } {
  const pidsOf = (pattern: string) =>
    execFileSync("sh", ["-c", `pgrep ${pattern} || true`])
      .toString()
      .trim()
      .split(/\s+/)
      .filter(Boolean);
  const rss = (pids: string[]) =>
    pids.reduce((sum, pid) => {
      try {
        return sum + Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0) * 1024;
      } catch {
        return sum; // exited meanwhile
      }
    }, 0);
  return { host: rss(pidsOf(`-f "edge/local/main.ts"`)), workerd: rss(pidsOf("-x workerd")) };
}
const PARTS = Math.ceil(SIZE / PART);
/** Part `index` of the source file (8 MiB, the last shorter), read when it is sent. */
function readPart(fd: number, index: number): Buffer<ArrayBuffer> {
  const buffer = Buffer.alloc(Math.min(PART, SIZE - index * PART));
  readSync(fd, buffer, 0, buffer.length, index * PART);
  return buffer;
}
/** Sends every part of the source with `send`, IN_FLIGHT at a time, as the AWS tools do. */
async function sendParts(send: (index: number, body: Buffer<ArrayBuffer>) => Promise<void>): Promise<void> {
  const fd = openSync(source, "r");
  let next = 0;
  try {
    await Promise.all(
      Array.from({ length: IN_FLIGHT }, async () => {
        for (let index = next++; index < PARTS; index = next++) await send(index, readPart(fd, index));
      }),
    );
  } finally {
    closeSync(fd);
  }
}

try {
  const auth = { "x-api-key": stack.adminKey };
  await stack.post("/api/configs/environments", { name: "bench" });
  const job = ((await (await stack.post("/api/queue/submit", { config_name: "bench", target: "local" })).json()) as { job_id: string })
    .job_id;
  const creds = (await (await fetch(`${stack.base}/api/queue/${job}/storage-credentials`, { method: "POST", headers: auth })).json()) as {
    access_key_id: string;
    secret_access_key: string;
    endpoint_url: string;
  };
  const s3 = new S3Client({
    endpoint: creds.endpoint_url,
    forcePathStyle: true,
    region: "auto",
    credentials: { accessKeyId: creds.access_key_id, secretAccessKey: creds.secret_access_key },
    expectContinueHeader: false,
  });
  const rssBefore = stackRss();
  const rssPeak = { ...rssBefore };
  const sampler = setInterval(() => {
    const now = stackRss();
    rssPeak.host = Math.max(rssPeak.host, now.host);
    rssPeak.workerd = Math.max(rssPeak.workerd, now.workerd);
  }, 250);

  const created = await s3.send(new CreateMultipartUploadCommand({ Bucket: job, Key: "model.bin" }));
  const parts: { PartNumber: number; ETag: string }[] = [];
  t0 = performance.now();
  await sendParts(async (index, body) => {
    const part = await s3.send(
      new UploadPartCommand({ Bucket: job, Key: "model.bin", UploadId: created.UploadId, PartNumber: index + 1, Body: body }),
    );
    parts[index] = { PartNumber: index + 1, ETag: part.ETag! };
  });
  await s3.send(
    new CompleteMultipartUploadCommand({ Bucket: job, Key: "model.bin", UploadId: created.UploadId, MultipartUpload: { Parts: parts } }),
  );
  const upSeconds = (performance.now() - t0) / 1000;
  const afterUpload = { ...rssPeak };
  // The source's hash, read after the timing so it costs the upload nothing.
  const sourceHash = createHash("sha256");
  const fd = openSync(source, "r");
  for (let index = 0; index < PARTS; index++) sourceHash.update(readPart(fd, index));
  closeSync(fd);

  t0 = performance.now();
  const got = await s3.send(new GetObjectCommand({ Bucket: job, Key: "model.bin" }));
  const downHash = createHash("sha256");
  let received = 0;
  for await (const chunk of got.Body as AsyncIterable<Uint8Array>) {
    downHash.update(chunk);
    received += chunk.byteLength;
  }
  const downSeconds = (performance.now() - t0) / 1000;
  clearInterval(sampler);
  const exact = received === SIZE && downHash.digest("hex") === sourceHash.digest("hex");
  const upMBs = SIZE / 1e6 / upSeconds;
  const downMBs = SIZE / 1e6 / downSeconds;
  out(
    `upload   ${PARTS} parts of 8 MiB, ${IN_FLIGHT} in flight: ${upSeconds.toFixed(1)} s = ${upMBs.toFixed(1)} MB/s = ${((upMBs / diskMBs) * 100).toFixed(1)} % of the disk copy (target >= 30 %: ${upMBs / diskMBs >= 0.3 ? "met" : "NOT met"})`,
  );
  out(
    `download one GetObject stream: ${downSeconds.toFixed(1)} s = ${downMBs.toFixed(1)} MB/s = ${((downMBs / diskMBs) * 100).toFixed(1)} % of the disk copy (target >= 30 %: ${downMBs / diskMBs >= 0.3 ? "met" : "NOT met"})`,
  );
  out(`byte-exact: ${exact ? "yes" : "NO"}`);
  const mb = (n: number) => (n / 1e6).toFixed(0);
  out(`RSS peak by the end of the upload: host ${mb(afterUpload.host)} MB, workerd ${mb(afterUpload.workerd)} MB`);
  out(
    `RSS, host process: ${mb(rssBefore.host)} MB before, peak ${mb(rssPeak.host)} MB (+${mb(rssPeak.host - rssBefore.host)}); workerd: ${mb(rssBefore.workerd)} MB before, peak ${mb(rssPeak.workerd)} MB (+${mb(rssPeak.workerd - rssBefore.workerd)}), for a ${mb(SIZE)} MB object`,
  );
  const ceiling = await r2UploadCeiling();
  out(
    `local R2 simulator alone (a bare Worker piping each part into uploadPart): ${ceiling.toFixed(1)} MB/s = ${((ceiling / diskMBs) * 100).toFixed(1)} % of the disk copy; the endpoint's upload reaches ${((upMBs / ceiling) * 100).toFixed(0)} % of it`,
  );
} finally {
  await stack.stop();
  rmSync(dir, { recursive: true, force: true });
}

/**
 * What the local R2 simulator allows by itself for uploads: the same 8 MiB parts, 4 in flight,
 * sent with fetch to a bare Worker that pipes each request body into R2's uploadPart. No
 * signature, no checksum, no service code: the ceiling any endpoint on this R2 can reach here.
 */
async function r2UploadCeiling(): Promise<number> {
  const script = `export default { async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === "/create") return new Response((await env.B.createMultipartUpload("o")).uploadId);
    return new Response((await env.B.resumeMultipartUpload("o", url.searchParams.get("upload")).uploadPart(Number(url.searchParams.get("n")), request.body)).etag);
  } };`;
  const mf = new Miniflare({
    modules: true,
    script,
    compatibilityDate: COMPATIBILITY_DATE,
    r2Buckets: ["B"],
    r2Persist: mkdtempSync(join(dir, "r2-")),
    host: "127.0.0.1",
    port: 0,
  });
  try {
    const base = await mf.ready;
    const uploadId = await (await fetch(new URL("/create", base), { method: "POST" })).text();
    const t0 = performance.now();
    await sendParts(async (index, body) => {
      const answer = await fetch(new URL(`/part?upload=${encodeURIComponent(uploadId)}&n=${index + 1}`, base), { method: "PUT", body });
      if (!answer.ok) throw new Error(`bare uploadPart answered ${answer.status}`);
      await answer.text();
    });
    return SIZE / 1e6 / ((performance.now() - t0) / 1000);
  } finally {
    await mf.dispose();
  }
}
