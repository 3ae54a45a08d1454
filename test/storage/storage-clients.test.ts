// The S3-compatible storage endpoint driven by the stock AWS tools a job would use: the AWS CLI
// (`aws s3 cp`, `ls`, `sync`) and boto3 (upload_file/download_file, put/get/head, paginated
// listing, refusals), each run as a child process with the job's credentials and otherwise the
// tools' defaults. Every block is skipped where its tool is not installed, and fails under CI=true (.ci/run installs
// Debian's awscli and python3-boto3), the HTTPS test where openssl is not.
//
// The tools reach the stack through a transparent front on loopback that records each request's
// head, over plain HTTP and over HTTPS. The two are different wire formats: botocore signs the
// payload's SHA-256 and sends `x-amz-checksum-crc32` as a header over HTTP, but over HTTPS (every
// real deployment) it streams `Content-Encoding: aws-chunked` bodies with
// `x-amz-content-sha256: STREAMING-UNSIGNED-PAYLOAD-TRAILER` and the CRC32 in a trailer.
import { prerequisite } from "../helpers/prerequisites";
import { execFile, execFileSync, spawnSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { connect, createServer as createTcpServer, type AddressInfo, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { createServer as createTlsServer } from "node:tls";
import { crc32 } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";

// The user's own AWS settings (profile, region, endpoint, credentials) must not reach the tools.
const baseEnv: NodeJS.ProcessEnv = Object.fromEntries(Object.entries(process.env).filter(([name]) => !/^(AWS_|BOTO_)/.test(name)));
const installed = (command: string, args: string[]) =>
  spawnSync(command, args, { stdio: "ignore", env: baseEnv, timeout: 30_000 }).status === 0;
const hasAws = prerequisite("the AWS CLI (aws)", installed("aws", ["--version"]));
const hasBoto3 = prerequisite("boto3 (python3 -c 'import boto3')", installed("python3", ["-c", "import boto3"]));
const hasOpenssl = prerequisite("openssl", installed("openssl", ["version"]));

/** Whether version `text` (1.2.3) is at least `min`. */
const atLeast = (text: string | undefined, min: number[]) => {
  const parts = (text ?? "0").split(".").map(Number);
  for (let i = 0; i < min.length; i++) if ((parts[i] ?? 0) !== min[i]) return (parts[i] ?? 0) > min[i]!;
  return true;
};
const versionOf = (command: string, args: string[]) => {
  const ran = spawnSync(command, args, { env: baseEnv, encoding: "utf8", timeout: 30_000 });
  return `${ran.stdout ?? ""}${ran.stderr ?? ""}`.trim();
};
// Whether the tool sends CRC32 checksums by default, and aws-chunked bodies over HTTPS: botocore
// 1.36 (January 2025: aws-cli 1.37, boto3 1.36), aws-cli v2 2.23 (v2 has a botocore of its own).
const awsVersion = hasAws ? versionOf("aws", ["--version"]) : "";
const modernAws = /^aws-cli\/2\./.test(awsVersion)
  ? atLeast(/^aws-cli\/([\d.]+)/.exec(awsVersion)?.[1], [2, 23])
  : atLeast(/botocore\/([\d.]+)/.exec(awsVersion)?.[1], [1, 36]);
const modernBoto3 = hasBoto3 && atLeast(versionOf("python3", ["-c", "import botocore; print(botocore.__version__)"]), [1, 36]);

const MiB = 1024 * 1024;
const PART = 8 * MiB;
const BIG = 20 * MiB; // three parts: 8 + 8 + 4 MiB

let t: TestStack;
let admin: { key: string; cookie: string };
let job: string;
let other: string;
let creds: { access_key_id: string; secret_access_key: string; endpoint_url: string; bucket: string };
let work: string;
let caBundle: string | null = null;
let big: Buffer;
let bigFile: string;
const fronts: Partial<Record<Scheme, Front>> = {};

type Scheme = "http" | "https";
/** HTTPS where openssl could make a certificate for the front; the HTTPS-only assertions need it. */
const secure = (): Scheme => (fronts.https ? "https" : "http");

const sha256 = (data: Buffer) => createHash("sha256").update(data).digest("hex");
const md5 = (data: Buffer) => createHash("md5").update(data).digest("hex");
const crc32Base64 = (data: Buffer) => {
  const out = Buffer.alloc(4);
  out.writeUInt32BE(crc32(data) >>> 0);
  return out.toString("base64");
};

// ---------------------------------------------------------------------------------------------
// The recording front

interface SentRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  /** Lower-case names. */
  headers: Record<string, string>;
}

interface Front {
  endpoint: string;
  requests: SentRequest[];
  close(): Promise<void>;
}

/** The request line and headers at the start of `chunk`, if it starts a request. */
function requestHead(chunk: Buffer): SentRequest | null {
  const text = chunk.subarray(0, 16_384).toString("latin1");
  const line = /^([A-Z]+) (\S+) HTTP\/1\.1\r\n/.exec(text);
  const end = text.indexOf("\r\n\r\n");
  if (!line || end < 0) return null;
  const headers: Record<string, string> = {};
  for (const field of text.slice(line[0].length, end).split("\r\n")) {
    const colon = field.indexOf(":");
    if (colon > 0) headers[field.slice(0, colon).trim().toLowerCase()] = field.slice(colon + 1).trim();
  }
  const target = new URL(line[2]!, "http://front");
  return { method: line[1]!, path: decodeURIComponent(target.pathname), query: target.searchParams, headers };
}

/**
 * A TCP (or TLS-terminating) pipe to the stack that notes each request's head as it passes. The
 * tools answer to it exactly as to the stack: they sign the Host they connect to, and the pipe
 * passes every byte unchanged. A client sends the next request on a connection only once the
 * previous answer has come, so each request's head starts a new read.
 */
async function startFront(origin: URL, tls: { key: Buffer; cert: Buffer } | null): Promise<Front> {
  const requests: SentRequest[] = [];
  const sockets = new Set<Socket>();
  const onClient = (client: Socket) => {
    const upstream = connect(Number(origin.port), origin.hostname);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on("close", () => sockets.delete(socket));
    }
    client.on("data", (chunk: Buffer) => {
      const head = requestHead(chunk);
      if (head) requests.push(head);
      if (!upstream.write(chunk)) {
        client.pause();
        upstream.once("drain", () => client.resume());
      }
    });
    client.on("end", () => upstream.end());
    upstream.pipe(client);
    client.on("error", () => upstream.destroy());
    upstream.on("error", () => client.destroy());
  };
  // TLS 1.2 at most: botocore waits up to 1 s for the `100 Continue` it asks for by checking
  // whether the socket has become readable. Over TLS 1.3 the server's session tickets make it
  // readable at once, and botocore then blocks reading a status line that never comes (workerd
  // never answers `Expect: 100-continue` locally) until its 60 s read timeout, and retries:
  // measured, `aws s3 cp` of a 3 MB file gave up after 5 minutes with the body never sent.
  // Cloudflare's edge answers 100 Continue, so a deployment never meets this.
  const server: Server = tls ? createTlsServer({ ...tls, maxVersion: "TLSv1.2" }, onClient) : createTcpServer(onClient);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    endpoint: `${tls ? "https" : "http"}://127.0.0.1:${port}${origin.pathname}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

// ---------------------------------------------------------------------------------------------
// Running the tools

interface Ran {
  code: number | string;
  stdout: string;
  stderr: string;
  seconds: number;
}

/** Runs a tool without blocking this process (the front lives in it), never longer than `timeoutMs`. */
function runTool(command: string, args: string[], env: NodeJS.ProcessEnv, timeoutMs: number): Promise<Ran> {
  const started = performance.now();
  return new Promise((resolve) => {
    execFile(command, args, { env, timeout: timeoutMs, maxBuffer: 64 * MiB, encoding: "utf8" }, (error, stdout, stderr) => {
      const code = error ? ((error as NodeJS.ErrnoException & { code?: number | string }).code ?? (error.killed ? "killed" : -1)) : 0;
      resolve({ code, stdout, stderr, seconds: (performance.now() - started) / 1000 });
    });
  });
}

/** The job's credentials in the environment, and nothing of the user's configuration. */
function toolEnv(): NodeJS.ProcessEnv {
  return {
    ...baseEnv,
    AWS_ACCESS_KEY_ID: creds.access_key_id,
    AWS_SECRET_ACCESS_KEY: creds.secret_access_key,
    AWS_DEFAULT_REGION: "auto",
    // Only the multipart settings below; the user's ~/.aws never reaches the tools.
    AWS_CONFIG_FILE: join(work, "aws-config"),
    AWS_SHARED_CREDENTIALS_FILE: join(work, "no-such-credentials"),
    AWS_EC2_METADATA_DISABLED: "true",
    ...(caBundle ? { AWS_CA_BUNDLE: caBundle } : {}),
  };
}

/** `aws <args> --endpoint-url <front>`; fails the test with the CLI's stderr when it fails. */
async function aws(scheme: Scheme, args: string[], timeoutMs = 100_000): Promise<Ran> {
  const ran = await runTool("aws", [...args, "--endpoint-url", fronts[scheme]!.endpoint], toolEnv(), timeoutMs);
  expect(ran.code, `aws ${args.join(" ")}\n${ran.stderr}`).toBe(0);
  return ran;
}

const PY_PRELUDE = String.raw`
import json, os, sys
import boto3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import ClientError

args = json.loads(sys.argv[1])
MiB = 1024 * 1024
sent = []

def client(secret=None, expect=False):
    """A client of the endpoint, credentials from the environment (or this secret); records what it sends."""
    extra = {"aws_access_key_id": os.environ["AWS_ACCESS_KEY_ID"], "aws_secret_access_key": secret} if secret else {}
    s3 = boto3.client("s3", endpoint_url=args["endpoint"], config=Config(s3={"addressing_style": "path"}), **extra)

    def before_send(request, event_name, **kwargs):
        # botocore asks for "Expect: 100-continue" on every upload of a file-like body (over HTTPS
        # that is every upload: the aws-chunked body is one) and waits up to 1 s for the answer
        # workerd never gives locally, so each sequential put_object took a second longer. The
        # header is not signed, so it can go here (expect=True keeps botocore's default).
        if not expect and "Expect" in request.headers:
            del request.headers["Expect"]
        heads = {k.lower(): (v.decode() if isinstance(v, bytes) else str(v)) for k, v in request.headers.items()}
        heads.pop("authorization", None)
        sent.append({"operation": event_name.split(".")[-1], "method": request.method, "url": request.url, "headers": heads})

    s3.meta.events.register("before-send.s3.*", before_send)
    return s3

def error_of(call):
    try:
        call()
    except ClientError as e:
        return {"code": e.response["Error"]["Code"], "status": e.response["ResponseMetadata"]["HTTPStatusCode"]}
    return None

def done(result):
    print(json.dumps({"result": result, "sent": sent}))
`;

interface BotoSent {
  operation: string;
  method: string;
  url: string;
  headers: Record<string, string>;
}

/** Runs `body` after PY_PRELUDE with `args` (plus the endpoint and bucket); returns what it passed to done(). */
async function boto3<T = any>(
  scheme: Scheme,
  body: string,
  args: Record<string, unknown> = {},
  timeoutMs = 100_000,
): Promise<{ result: T; sent: BotoSent[] }> {
  const input = JSON.stringify({ endpoint: fronts[scheme]!.endpoint, bucket: job, ...args });
  const ran = await runTool("python3", ["-c", PY_PRELUDE + body, input], toolEnv(), timeoutMs);
  expect(ran.code, ran.stderr).toBe(0);
  const last = ran.stdout.trim().split("\n").at(-1)!;
  return JSON.parse(last);
}

// ---------------------------------------------------------------------------------------------
// What the uploads must have looked like on the wire

/**
 * An upload's headers (UploadPart, PutObject) against its bytes. Whatever the client's version,
 * every hash or length it declares must be the body's. A client with the current defaults
 * (`modern`) must also have sent what they prescribe: over HTTPS an aws-chunked body with a CRC32
 * trailer, over HTTP the body's SHA-256 signed and its CRC32 in a header. Older ones (Debian 12's
 * awscli 2.9 and boto3 1.26) send UNSIGNED-PAYLOAD over HTTPS and no CRC32.
 */
function expectUploadFraming(scheme: Scheme, headers: Record<string, string>, bytes: Buffer, modern: boolean): void {
  const contentSha256 = headers["x-amz-content-sha256"] ?? "";
  if (/^[0-9a-f]{64}$/.test(contentSha256)) expect(contentSha256).toBe(sha256(bytes));
  if ((headers["content-encoding"] ?? "").includes("aws-chunked"))
    expect(headers["x-amz-decoded-content-length"]).toBe(String(bytes.length));
  else expect(headers["content-length"]).toBe(String(bytes.length));
  if (headers["x-amz-checksum-crc32"] !== undefined) expect(headers["x-amz-checksum-crc32"]).toBe(crc32Base64(bytes));
  if (headers["content-md5"] !== undefined) expect(headers["content-md5"]).toBe(createHash("md5").update(bytes).digest("base64"));
  if (!modern) return;
  if (scheme === "https") {
    expect(headers).toMatchObject({
      "x-amz-content-sha256": "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
      "content-encoding": "aws-chunked",
      "x-amz-trailer": "x-amz-checksum-crc32",
      "x-amz-sdk-checksum-algorithm": "CRC32",
    });
    expect(headers["x-amz-checksum-crc32"]).toBeUndefined();
  } else {
    expect(headers).toMatchObject({ "x-amz-content-sha256": sha256(bytes), "x-amz-checksum-crc32": crc32Base64(bytes) });
    expect(headers["content-encoding"]).toBeUndefined();
  }
}

/** The parts of BIG as UploadPart requests must have carried them. */
function expectMultipartUploads(
  scheme: Scheme,
  requests: { query: URLSearchParams; headers: Record<string, string> }[],
  data: Buffer,
  modern: boolean,
): void {
  const parts = requests
    .filter((r) => r.query.has("partNumber"))
    .sort((a, b) => Number(a.query.get("partNumber")) - Number(b.query.get("partNumber")));
  expect(parts.map((p) => Number(p.query.get("partNumber")))).toEqual([1, 2, 3]);
  parts.forEach((part, i) => expectUploadFraming(scheme, part.headers, data.subarray(i * PART, (i + 1) * PART), modern));
}

// ---------------------------------------------------------------------------------------------

beforeAll(async () => {
  if (!hasAws && !hasBoto3) return;
  t = await startTestStack();
  admin = await setUpAdmin(t);
  expect((await t.call("POST", "/api/configs/environments", { json: { name: "gpu" }, auth: { key: admin.key } })).status).toBe(201);
  const submit = async () =>
    (await t.call("POST", "/api/queue/submit", { json: { config_name: "gpu", target: "local" }, auth: { key: admin.key } })).body
      .job_id as string;
  // No GPU box is registered: the jobs stay pending, which is active.
  job = await submit();
  other = await submit();
  const issued = await t.call("POST", `/api/queue/${job}/storage-credentials`, { auth: { key: admin.key } });
  expect(issued.status).toBe(201);
  creds = issued.body;
  expect(creds.bucket).toBe(job);

  work = mkdtempSync(join(tmpdir(), "storage-clients-"));
  writeFileSync(join(work, "aws-config"), "[default]\ns3 =\n  multipart_threshold = 8MB\n  multipart_chunksize = 8MB\n");
  big = randomBytes(BIG);
  bigFile = join(work, "big.bin");
  writeFileSync(bigFile, big);

  const origin = new URL(creds.endpoint_url);
  fronts.http = await startFront(origin, null);
  if (hasOpenssl) {
    const key = join(work, "front-key.pem");
    caBundle = join(work, "front-cert.pem");
    execFileSync(
      "openssl",
      [
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-keyout",
        key,
        "-out",
        caBundle,
        "-days",
        "2",
        "-subj",
        "/CN=127.0.0.1",
        "-addext",
        "subjectAltName=IP:127.0.0.1,DNS:localhost",
      ],
      { stdio: "ignore" },
    );
    fronts.https = await startFront(origin, { key: readFileSync(key), cert: readFileSync(caBundle) });
  }
});

afterAll(async () => {
  await fronts.http?.close();
  await fronts.https?.close();
  await t?.stop();
  if (work) rmSync(work, { recursive: true, force: true });
});

describe.skipIf(!hasAws)("the AWS CLI (aws s3)", () => {
  async function copyRoundTrip(scheme: Scheme) {
    const key = `cli-${scheme}.bin`;
    const front = fronts[scheme]!;
    front.requests.length = 0;
    const up = await aws(scheme, ["s3", "cp", bigFile, `s3://${job}/${key}`, "--no-progress"]);
    expect(up.stdout).toMatch(new RegExp(`^upload: \\S*/big\\.bin to s3://${job}/${key}\\s*$`, "m"));
    // Multipart at the configured 8 MB, every part framed as this scheme makes botocore frame it.
    expect(front.requests.filter((r) => r.method === "POST" && r.query.has("uploads"))).toHaveLength(1);
    expectMultipartUploads(scheme, front.requests, big, modernAws);
    // botocore asks for 100 Continue on every file upload; unanswered, it waits 1 s (parts in parallel).
    expect(front.requests.filter((r) => r.query.has("partNumber")).every((r) => r.headers.expect === "100-continue")).toBe(true);

    const listed = await aws(scheme, ["s3", "ls", `s3://${job}/`]);
    expect(listed.stdout).toMatch(new RegExp(`^\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d +${BIG} ${key}$`, "m"));

    const downloaded = join(work, `${key}.down`);
    await aws(scheme, ["s3", "cp", `s3://${job}/${key}`, downloaded, "--no-progress"]);
    expect(sha256(readFileSync(downloaded))).toBe(sha256(big));
    rmSync(downloaded);
  }

  it("cp uploads 20 MiB as multipart over HTTP (signed SHA-256 payloads), lists it, downloads it byte-exact", async () => {
    await copyRoundTrip("http");
  }, 120_000);

  it.skipIf(!hasOpenssl)(
    "cp uploads 20 MiB as multipart over HTTPS (aws-chunked with a CRC32 trailer), lists it, downloads it byte-exact",
    async () => {
      await copyRoundTrip("https");
    },
    120_000,
  );

  it("sync uploads a tree, a second sync uploads nothing, and syncing down reproduces it byte-exact", async () => {
    const scheme = secure();
    const front = fronts[scheme]!;
    const files: Record<string, Buffer> = {
      "readme.txt": Buffer.from("a job's results\n"),
      "empty.txt": Buffer.alloc(0),
      "data/weights.bin": randomBytes(300_000),
      "data/nested/deeper/config.json": Buffer.from(JSON.stringify({ lr: 0.001, steps: 1000 })),
      "data/space name.txt": Buffer.from("space"),
      "data/plus+sign.txt": Buffer.from("plus"),
      "data/ünïcødé.txt": Buffer.from("unicode"),
    };
    const source = join(work, "sync-source");
    for (const [path, data] of Object.entries(files)) {
      mkdirSync(join(source, path, ".."), { recursive: true });
      writeFileSync(join(source, path), data);
    }

    front.requests.length = 0;
    const first = await aws(scheme, ["s3", "sync", source, `s3://${job}/sync/`, "--no-progress"]);
    const uploads = first.stdout.split("\n").filter((line) => line.startsWith("upload: "));
    expect(uploads.map((line) => line.slice(line.indexOf(` to s3://${job}/sync/`) + ` to s3://${job}/sync/`.length)).sort()).toEqual(
      Object.keys(files).sort(),
    );
    const puts = front.requests.filter((r) => r.method === "PUT");
    expect(puts.map((r) => r.path.slice(`/api/cloud/storage/${job}/sync/`.length)).sort()).toEqual(Object.keys(files).sort());
    for (const put of puts)
      expectUploadFraming(scheme, put.headers, files[put.path.slice(`/api/cloud/storage/${job}/sync/`.length)]!, modernAws);

    const second = await aws(scheme, ["s3", "sync", source, `s3://${job}/sync/`, "--no-progress"]);
    expect(second.stdout.trim()).toBe("");

    const target = join(work, "sync-target");
    mkdirSync(target);
    const down = await aws(scheme, ["s3", "sync", `s3://${job}/sync/`, target, "--no-progress"]);
    expect(down.stdout.split("\n").filter((line) => line.startsWith("download: "))).toHaveLength(Object.keys(files).length);
    expect(treeOf(target)).toEqual(treeOf(source));
    expect(Object.keys(treeOf(target)).sort()).toEqual(Object.keys(files).sort());
  }, 120_000);
});

/** Every file under `root`, by path relative to it, as its SHA-256. */
function treeOf(root: string): Record<string, string> {
  const tree: Record<string, string> = {};
  for (const entry of readdirSync(root, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    tree[relative(root, path)] = sha256(readFileSync(path));
  }
  return tree;
}

describe.skipIf(!hasBoto3)("boto3", () => {
  it("upload_file sends 20 MiB as multipart and download_file gives it back byte-exact, with and without Expect: 100-continue", async () => {
    const scheme = secure();
    const script = String.raw`
s3 = client(expect=args["expect"])
config = TransferConfig(multipart_threshold=8 * MiB, multipart_chunksize=8 * MiB)
s3.upload_file(args["source"], args["bucket"], args["key"], Config=config)
s3.download_file(args["bucket"], args["key"], args["target"], Config=config)
head = s3.head_object(Bucket=args["bucket"], Key=args["key"])
done({"length": head["ContentLength"], "etag": head["ETag"]})
`;
    for (const expectContinue of [true, false]) {
      const key = `boto3/model-${expectContinue ? "expect" : "no-expect"}.safetensors`;
      const target = join(work, `boto3-${expectContinue}.down`);
      const ran = await boto3(scheme, script, { source: bigFile, target, key, expect: expectContinue });
      expect(sha256(readFileSync(target))).toBe(sha256(big));
      rmSync(target);
      expect(ran.result.length).toBe(BIG);
      expect(ran.result.etag).toMatch(/^"[0-9a-f]{32}-3"$/);
      const parts = ran.sent.filter((s) => s.operation === "UploadPart");
      expectMultipartUploads(
        scheme,
        parts.map((p) => ({ query: new URL(p.url).searchParams, headers: p.headers })),
        big,
        modernBoto3,
      );
      expect(parts.every((p) => (p.headers.expect === "100-continue") === expectContinue)).toBe(true);
      // download_file reads an object over the threshold as ranged GETs of the chunk size (the
      // last one open-ended).
      const gets = ran.sent.filter((s) => s.operation === "GetObject").map((s) => /^bytes=(\d+)-(\d*)$/.exec(s.headers.range ?? "")!);
      expect(gets.map((m) => Number(m[1])).sort((a, b) => a - b)).toEqual([0, PART, 2 * PART]);
      for (const [, start, end] of gets) expect([String(Math.min(Number(start) + PART, BIG) - 1), ""]).toContain(end);
    }
  }, 120_000);

  it("put_object and get_object with Range, head_object, and list_objects_v2 with prefix, delimiter and a paginator", async () => {
    const scheme = secure();
    const data = randomBytes(300_000);
    const source = join(work, "object.bin");
    writeFileSync(source, data);
    const script = String.raw`
import base64
s3 = client()
b = args["bucket"]
data = open(args["source"], "rb").read()
put = s3.put_object(Bucket=b, Key="objects/data.bin", Body=data)
def ranged(spec):
    got = s3.get_object(Bucket=b, Key="objects/data.bin", Range=spec)
    return {"body": base64.b64encode(got["Body"].read()).decode(), "range": got["ContentRange"], "length": got["ContentLength"], "status": got["ResponseMetadata"]["HTTPStatusCode"]}
whole = s3.get_object(Bucket=b, Key="objects/data.bin")["Body"].read()
head = s3.head_object(Bucket=b, Key="objects/data.bin")
for key in args["keys"]:
    s3.put_object(Bucket=b, Key=key, Body=key.encode())
pages = s3.get_paginator("list_objects_v2")
flat = [[o["Key"] for o in page.get("Contents", [])] for page in pages.paginate(Bucket=b, Prefix="list/", PaginationConfig={"PageSize": 3})]
delimited = [{"keys": [o["Key"] for o in page.get("Contents", [])], "prefixes": [p["Prefix"] for p in page.get("CommonPrefixes", [])], "count": page["KeyCount"]}
             for page in pages.paginate(Bucket=b, Prefix="list/", Delimiter="/", PaginationConfig={"PageSize": 2})]
folders = s3.list_objects_v2(Bucket=b, Prefix="list/sub", Delimiter="/")
done({
    "put_etag": put["ETag"],
    "whole": base64.b64encode(whole).decode(),
    "middle": ranged("bytes=1000-1999"), "suffix": ranged("bytes=-10"), "open": ranged("bytes=299990-"),
    "head": {"length": head["ContentLength"], "etag": head["ETag"]},
    "flat": flat, "delimited": delimited,
    "folders": {"keys": [o["Key"] for o in folders.get("Contents", [])], "prefixes": [p["Prefix"] for p in folders.get("CommonPrefixes", [])]},
})
`;
    const keys = [
      "list/a.txt",
      "list/b.txt",
      "list/c.txt",
      "list/d.txt",
      "list/e.txt",
      "list/sub1/x.txt",
      "list/sub1/y.txt",
      "list/sub2/z.txt",
    ];
    const { result, sent } = await boto3(scheme, script, { source, keys });
    expect(result.put_etag).toBe(`"${md5(data)}"`);
    const put = sent.find((s) => s.operation === "PutObject" && s.url.endsWith("/objects/data.bin"))!;
    expectUploadFraming(scheme, put.headers, data, modernBoto3);
    expect(Buffer.from(result.whole, "base64").equals(data)).toBe(true);
    expect(result.middle).toEqual({
      body: data.subarray(1000, 2000).toString("base64"),
      range: "bytes 1000-1999/300000",
      length: 1000,
      status: 206,
    });
    expect(result.suffix).toEqual({
      body: data.subarray(299_990).toString("base64"),
      range: "bytes 299990-299999/300000",
      length: 10,
      status: 206,
    });
    expect(result.open).toEqual({
      body: data.subarray(299_990).toString("base64"),
      range: "bytes 299990-299999/300000",
      length: 10,
      status: 206,
    });
    expect(result.head).toEqual({ length: 300_000, etag: `"${md5(data)}"` });

    expect(result.flat).toEqual([keys.slice(0, 3), keys.slice(3, 6), keys.slice(6)]);
    // Pages of at most two entries (objects and folders together), every entry exactly once.
    const pages = result.delimited as { keys: string[]; prefixes: string[]; count: number }[];
    expect(pages.length).toBeGreaterThanOrEqual(4);
    for (const page of pages) {
      expect(page.count).toBe(page.keys.length + page.prefixes.length);
      expect(page.count).toBeLessThanOrEqual(2);
    }
    expect(pages.flatMap((p) => p.keys)).toEqual(keys.slice(0, 5));
    expect(pages.flatMap((p) => p.prefixes)).toEqual(["list/sub1/", "list/sub2/"]);
    expect(result.folders).toEqual({ keys: [], prefixes: ["list/sub1/", "list/sub2/"] });
    const lists = sent.filter((s) => s.operation === "ListObjectsV2").map((s) => new URL(s.url).searchParams.get("max-keys"));
    expect(lists.slice(0, 3)).toEqual(["3", "3", "3"]);
  }, 60_000);

  it("refuses a wrong secret (SignatureDoesNotMatch) and another job's bucket (AccessDenied), storing nothing", async () => {
    const script = String.raw`
good = client()
bad = client(secret=os.environ["AWS_SECRET_ACCESS_KEY"][:-4] + "xxxx")
b, other = args["bucket"], args["other"]
done({
    "wrong_secret_put": error_of(lambda: bad.put_object(Bucket=b, Key="refused/wrong-secret.txt", Body=b"x")),
    "wrong_secret_list": error_of(lambda: bad.list_objects_v2(Bucket=b)),
    "wrong_secret_stored": error_of(lambda: good.head_object(Bucket=b, Key="refused/wrong-secret.txt")),
    "other_put": error_of(lambda: good.put_object(Bucket=other, Key="refused/other.txt", Body=b"x")),
    "other_get": error_of(lambda: good.get_object(Bucket=other, Key="refused/other.txt")),
    "other_list": error_of(lambda: good.list_objects_v2(Bucket=other)),
    "other_multipart": error_of(lambda: good.create_multipart_upload(Bucket=other, Key="refused/other.bin")),
})
`;
    const { result } = await boto3(secure(), script, { other });
    expect(result).toEqual({
      wrong_secret_put: { code: "SignatureDoesNotMatch", status: 403 },
      wrong_secret_list: { code: "SignatureDoesNotMatch", status: 403 },
      // HEAD errors carry no body: botocore names them by status.
      wrong_secret_stored: { code: "404", status: 404 },
      other_put: { code: "AccessDenied", status: 403 },
      other_get: { code: "AccessDenied", status: 403 },
      other_list: { code: "AccessDenied", status: 403 },
      other_multipart: { code: "AccessDenied", status: 403 },
    });
    // The other job's bucket, as an admin reads it: nothing there (NoSuchBucket while it never had
    // credentials, an empty listing once it has).
    const otherBucket = await t.call("GET", `/api/cloud/storage/${other}?list-type=2`, { auth: { key: admin.key } });
    if (otherBucket.status === 404) expect(otherBucket.text).toContain("<Code>NoSuchBucket</Code>");
    else expect(otherBucket.text).toContain("<KeyCount>0</KeyCount>");
  }, 60_000);
});
