import { randomBytes } from "node:crypto";
import { Readable } from "node:stream";
import { Sha256 } from "@aws-crypto/sha256-js";
import { GetObjectCommand, HeadObjectCommand, ListObjectsV2Command, PutObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { getSignedUrl, S3RequestPresigner } from "@aws-sdk/s3-request-presigner";
import { SignatureV4 } from "@smithy/signature-v4";
import * as esbuild from "esbuild";
import { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REPO_ROOT, WORKER_BUILD } from "../../edge/local/bundle";
import { COMPATIBILITY_DATE } from "../../edge/local/stack";
import { S3Error } from "../../edge/storage/errors";
import { canonicalUri, parseSigV4, payloadSha256Check, verifySigV4, type ParsedAuth } from "../../edge/storage/sigv4";

// SigV4 as S3 checks it: AWS's documented examples, requests signed the way @aws-sdk/client-s3
// signs them, every refusal with its S3 code, and the real SDK against the module running in
// workerd.

const EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/** Parses and verifies; "ok" or the S3 code and message of the refusal. */
async function check(request: Request, secret: string, now: Date): Promise<"ok" | [string, string]> {
  const parsed = parseSigV4(request);
  if (parsed instanceof S3Error) return [parsed.code, parsed.message];
  const error = await verifySigV4(request, parsed, secret, now);
  return error ? [error.code, error.message] : "ok";
}

describe("AWS's documented S3 SigV4 examples", () => {
  const secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
  const credential = "AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request";
  const at = new Date("2013-05-24T00:00:00Z");
  const host = "examplebucket.s3.amazonaws.com";
  const signed = (url: string, method: string, headers: Record<string, string>, signedHeaders: string, signature: string) =>
    new Request(url, {
      method,
      headers: {
        ...headers,
        host,
        "x-amz-date": "20130524T000000Z",
        authorization: `AWS4-HMAC-SHA256 Credential=${credential},SignedHeaders=${signedHeaders},Signature=${signature}`,
      },
    });

  const examples: [string, Request][] = [
    [
      "GET Object with Range",
      signed(
        `http://${host}/test.txt`,
        "GET",
        { range: "bytes=0-9", "x-amz-content-sha256": EMPTY_SHA256 },
        "host;range;x-amz-content-sha256;x-amz-date",
        "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
      ),
    ],
    [
      // Signs the Date header (the SDK's signer would drop it) and a raw "$" (signed as %24).
      "PUT Object",
      signed(
        `http://${host}/test$file.text`,
        "PUT",
        {
          date: "Fri, 24 May 2013 00:00:00 GMT",
          "x-amz-storage-class": "REDUCED_REDUNDANCY",
          "x-amz-content-sha256": "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072",
        },
        "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class",
        "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd",
      ),
    ],
    [
      "GET Bucket lifecycle",
      signed(
        `http://${host}/?lifecycle`,
        "GET",
        { "x-amz-content-sha256": EMPTY_SHA256 },
        "host;x-amz-content-sha256;x-amz-date",
        "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543",
      ),
    ],
    [
      "ListObjects",
      signed(
        `http://${host}/?max-keys=2&prefix=J`,
        "GET",
        { "x-amz-content-sha256": EMPTY_SHA256 },
        "host;x-amz-content-sha256;x-amz-date",
        "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7",
      ),
    ],
    [
      "presigned GET",
      new Request(
        `https://${host}/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request` +
          "&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404",
        { headers: { host } },
      ),
    ],
  ];

  it.each(examples)("verifies the %s example", async (_, request) => {
    expect(await check(request, secret, at)).toBe("ok");
    expect(await check(request, secret.replace("K7", "K8"), at)).toEqual([
      "SignatureDoesNotMatch",
      "The request signature we calculated does not match the signature you provided. Check your key and signing method.",
    ]);
  });

  it("parses the presigned example's fields", () => {
    const parsed = parseSigV4(examples[4]![1]) as ParsedAuth;
    expect(parsed).toEqual({
      kind: "presigned",
      accessKeyId: "AKIAIOSFODNN7EXAMPLE",
      amzDate: "20130524T000000Z",
      signingDate: at,
      region: "us-east-1",
      service: "s3",
      scope: "20130524/us-east-1/s3/aws4_request",
      signedHeaders: ["host"],
      signature: "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404",
      payloadHash: "UNSIGNED-PAYLOAD",
      payloadMode: "unsigned",
      expiresSeconds: 86400,
    });
  });

  it("expires the presigned example exactly 86400 s after X-Amz-Date", async () => {
    const request = examples[4]![1];
    expect(await check(request, secret, new Date(at.getTime() + 86_400_000))).toBe("ok");
    expect(await check(request, secret, new Date(at.getTime() + 86_401_000))).toEqual(["AccessDenied", "Request has expired"]);
  });

  it("checks the PUT example's body against its x-amz-content-sha256", async () => {
    const hash = "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072";
    const read = async (text: string) => {
      const check = payloadSha256Check(hash);
      check.checksum.update(new TextEncoder().encode(text));
      check.done(check.checksum.digest());
      return text;
    };
    expect(await read("Welcome to Amazon S3.")).toBe("Welcome to Amazon S3.");
    const error = await read("Welcome to Amazon S3!").catch((e: S3Error) => e);
    expect(error).toMatchObject({
      code: "XAmzContentSHA256Mismatch",
      status: 400,
      message: "The provided 'x-amz-content-sha256' header does not match what was computed.",
    });
  });
});

const ACCESS_KEY = "AKIDJOB0001";
const SECRET = "job-upload/token+secret";
const ORIGIN = "http://127.0.0.1:8787";
const SIGNED_AT = new Date("2026-11-23T12:00:00Z");

/** How the SDK encodes a key into the path: each segment with encodeURIComponent plus !'()*. */
const sdkEncode = (key: string) => key.split("/").map(uriEncode).join("/");
const uriEncode = (text: string) => encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

interface SignOptions {
  method?: string;
  path: string;
  query?: Record<string, string>;
  headers?: Record<string, string>;
  secret?: string;
  presignExpires?: number;
}

/**
 * Signs like @aws-sdk/client-s3 (SignatureV4, path not re-escaped) or presigns like
 * @aws-sdk/s3-request-presigner, and returns the request to send.
 */
async function sdkSigned({
  method = "GET",
  path,
  query = {},
  headers = {},
  secret = SECRET,
  presignExpires,
}: SignOptions): Promise<Request> {
  const credentials = { accessKeyId: ACCESS_KEY, secretAccessKey: secret };
  const toSign = {
    method,
    protocol: "http:",
    hostname: "127.0.0.1",
    port: 8787,
    path,
    query,
    headers: { host: "127.0.0.1:8787", ...headers },
  };
  const signed =
    presignExpires === undefined
      ? await new SignatureV4({ service: "s3", region: "us-east-1", credentials, sha256: Sha256, uriEscapePath: false }).sign(
          { ...toSign, headers: { "x-amz-content-sha256": EMPTY_SHA256, ...toSign.headers } },
          { signingDate: SIGNED_AT },
        )
      : await new S3RequestPresigner({ service: "s3", region: "us-east-1", credentials, sha256: Sha256 }).presign(toSign, {
          signingDate: SIGNED_AT,
          expiresIn: presignExpires,
        });
  const search = Object.entries(signed.query ?? {})
    .map(([key, value]) => `${uriEncode(key)}=${uriEncode(value as string)}`)
    .join("&");
  return new Request(`${ORIGIN}${signed.path}${search ? `?${search}` : ""}`, { method, headers: signed.headers });
}

function withChange(request: Request, change: { url?: string; headers?: Record<string, string | null> }): Request {
  const headers = new Headers(request.headers);
  for (const [name, value] of Object.entries(change.headers ?? {})) {
    if (value === null) headers.delete(name);
    else headers.set(name, value);
  }
  return new Request(change.url ?? request.url, { method: request.method, headers });
}

describe("requests signed the way @aws-sdk/client-s3 signs them", () => {
  const keys = ["report.txt", "dir/a b+c.txt", "ünïcødé/€ 1.bin", "literal%2Fpercent", "sub/dir//double-slash", "tilde~!'()*$&=,;@.txt"];

  it.each(keys)("verifies a GetObject of %j under /api/cloud/storage", async (key) => {
    const request = await sdkSigned({ path: `/api/cloud/storage/results/${sdkEncode(key)}` });
    expect(await check(request, SECRET, SIGNED_AT)).toBe("ok");
    const presigned = await sdkSigned({ path: `/api/cloud/storage/results/${sdkEncode(key)}`, presignExpires: 900 });
    expect(await check(presigned, SECRET, SIGNED_AT)).toBe("ok");
  });

  it("verifies a path that carries %2F inside a segment, as clients that encode the whole key send it", async () => {
    const request = await sdkSigned({ path: `/api/cloud/storage/results/${uriEncode("dir/file name.txt")}` });
    expect(new URL(request.url).pathname).toBe("/api/cloud/storage/results/dir%2Ffile%20name.txt");
    expect(await check(request, SECRET, SIGNED_AT)).toBe("ok");
  });

  it("verifies a ListObjectsV2 whose query values need encoding, and trims and collapses header whitespace", async () => {
    const request = await sdkSigned({
      path: "/api/cloud/storage/results",
      query: { "list-type": "2", prefix: "job 1/ü+x", "continuation-token": "a/b+c==", "max-keys": "1000" },
      headers: { "x-amz-meta-note": "  spaced    out  value " },
    });
    expect(await check(request, SECRET, SIGNED_AT)).toBe("ok");
  });

  it("refuses a wrong secret, an altered signed header, path or query with SignatureDoesNotMatch", async () => {
    const request = await sdkSigned({
      path: "/api/cloud/storage/results/a.txt",
      query: { "x-id": "GetObject" },
      headers: { "x-amz-meta-owner": "alice", range: "bytes=0-9" },
    });
    expect(await check(request, SECRET, SIGNED_AT)).toBe("ok");
    const mismatch = [
      "SignatureDoesNotMatch",
      "The request signature we calculated does not match the signature you provided. Check your key and signing method.",
    ];
    expect(await check(request, "job-upload/token+secreT", SIGNED_AT)).toEqual(mismatch);
    expect(await check(withChange(request, { headers: { "x-amz-meta-owner": "mallory" } }), SECRET, SIGNED_AT)).toEqual(mismatch);
    expect(await check(withChange(request, { headers: { range: "bytes=0-99" } }), SECRET, SIGNED_AT)).toEqual(mismatch);
    expect(await check(withChange(request, { url: request.url.replace("/a.txt", "/b.txt") }), SECRET, SIGNED_AT)).toEqual(mismatch);
    expect(await check(withChange(request, { url: request.url.replace("/results/", "/other/") }), SECRET, SIGNED_AT)).toEqual(mismatch);
    expect(await check(withChange(request, { url: request.url.replace("GetObject", "PutObject") }), SECRET, SIGNED_AT)).toEqual(mismatch);
    expect(await check(withChange(request, { url: request.url + "&versionId=1" }), SECRET, SIGNED_AT)).toEqual(mismatch);
    expect(await check(withChange(request, { headers: { "x-amz-content-sha256": "UNSIGNED-PAYLOAD" } }), SECRET, SIGNED_AT)).toEqual(
      mismatch,
    );
  });

  it("refuses an unsigned x-amz-* header, and a signed header that is missing, with AccessDenied", async () => {
    const request = await sdkSigned({ path: "/api/cloud/storage/results/a.txt", headers: { "x-amz-meta-owner": "alice" } });
    expect(await check(withChange(request, { headers: { "x-amz-trailer": "x-amz-checksum-crc32" } }), SECRET, SIGNED_AT)).toEqual([
      "AccessDenied",
      "There were headers present in the request which were not signed: x-amz-trailer",
    ]);
    expect(await check(withChange(request, { headers: { "x-amz-meta-owner": null } }), SECRET, SIGNED_AT)).toEqual([
      "AccessDenied",
      'The signed header "x-amz-meta-owner" is not in the request.',
    ]);
  });

  it("refuses a header-signed request more than 15 minutes from the server's clock with RequestTimeTooSkewed", async () => {
    const request = await sdkSigned({ path: "/api/cloud/storage/results/a.txt" });
    const skewed = ["RequestTimeTooSkewed", "The difference between the request time and the server's time is too large."];
    expect(await check(request, SECRET, new Date(SIGNED_AT.getTime() + 15 * 60_000))).toBe("ok");
    expect(await check(request, SECRET, new Date(SIGNED_AT.getTime() - 15 * 60_000))).toBe("ok");
    expect(await check(request, SECRET, new Date(SIGNED_AT.getTime() + 15 * 60_000 + 1))).toEqual(skewed);
    expect(await check(request, SECRET, new Date(SIGNED_AT.getTime() - 15 * 60_000 - 1))).toEqual(skewed);
  });

  it('refuses an expired presigned URL with AccessDenied "Request has expired", however fresh the clock skew', async () => {
    const request = await sdkSigned({ path: "/api/cloud/storage/results/a.txt", presignExpires: 60 });
    expect(await check(request, SECRET, new Date(SIGNED_AT.getTime() + 60_000))).toBe("ok");
    expect(await check(request, SECRET, new Date(SIGNED_AT.getTime() + 60_001))).toEqual(["AccessDenied", "Request has expired"]);
    expect(await check(request, SECRET, new Date(SIGNED_AT.getTime() - 16 * 60_000))).toEqual(["AccessDenied", "Request is not valid yet"]);
  });

  it("refuses absent, unsupported and malformed authentication with S3's codes", async () => {
    const request = await sdkSigned({ path: "/api/cloud/storage/results/a.txt" });
    const auth = request.headers.get("authorization")!;
    const cases: [Record<string, string | null>, string, string][] = [
      [{ authorization: null }, "AccessDenied", "Access Denied"],
      [
        { authorization: "AWS AKIDJOB0001:c2lnbmF0dXJl" },
        "InvalidRequest",
        "The authorization mechanism you have provided is not supported. Please use AWS4-HMAC-SHA256.",
      ],
      [
        { authorization: auth.replace("/s3/", "/ec2/") },
        "AuthorizationHeaderMalformed",
        'The authorization header is malformed; incorrect service "ec2". This endpoint belongs to "s3".',
      ],
      [
        { authorization: auth.replace("/20261123/", "/20261122/") },
        "AuthorizationHeaderMalformed",
        'The authorization header is malformed; Invalid credential date "20261122". This date is not the same as X-Amz-Date: "20261123".',
      ],
      [
        { authorization: auth.replace("Credential=AKIDJOB0001/", "Credential=") },
        "AuthorizationHeaderMalformed",
        `The authorization header is malformed; the Credential is mal-formed; expecting "<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request".`,
      ],
      [
        { authorization: auth.replace(/, Signature=\w+/, "") },
        "AuthorizationHeaderMalformed",
        "The authorization header is malformed; it needs Credential, SignedHeaders and Signature.",
      ],
      [
        { authorization: auth.replace("SignedHeaders=host;", "SignedHeaders=") },
        "AccessDenied",
        "The host header must be among the signed headers.",
      ],
      [{ "x-amz-date": null }, "AccessDenied", "AWS authentication requires a valid Date or x-amz-date header"],
      [{ "x-amz-date": "20261123T250000Z" }, "AccessDenied", "AWS authentication requires a valid Date or x-amz-date header"],
      [{ "x-amz-content-sha256": null }, "InvalidRequest", "Missing required header for this request: x-amz-content-sha256"],
      [
        { "x-amz-content-sha256": "STREAMING-AWS4-HMAC-SHA256-EVENTS" },
        "InvalidArgument",
        expect.stringContaining("x-amz-content-sha256 must be") as unknown as string,
      ],
    ];
    for (const [headers, code, message] of cases)
      expect(await check(withChange(request, { headers }), SECRET, SIGNED_AT), JSON.stringify(headers)).toEqual([code, message]);
  });

  it("refuses malformed presigned URLs with AuthorizationQueryParametersError, and two mechanisms at once", async () => {
    const presigned = await sdkSigned({ path: "/api/cloud/storage/results/a.txt", presignExpires: 3600 });
    const url = presigned.url;
    expect(
      await check(withChange(presigned, { url: url.replace("X-Amz-Expires=3600", "X-Amz-Expires=604801") }), SECRET, SIGNED_AT),
    ).toEqual(["AuthorizationQueryParametersError", "X-Amz-Expires must be less than a week (in seconds) that is 604800"]);
    expect(await check(withChange(presigned, { url: url.replace("X-Amz-Expires=3600", "X-Amz-Expires=0") }), SECRET, SIGNED_AT)).toEqual([
      "AuthorizationQueryParametersError",
      "X-Amz-Expires must be a whole number of seconds from 1 to 604800.",
    ]);
    expect(await check(withChange(presigned, { url: url.replace(/&X-Amz-Signature=\w+/, "") }), SECRET, SIGNED_AT)).toEqual([
      "AuthorizationQueryParametersError",
      "Query-string authentication version 4 requires the X-Amz-Algorithm, X-Amz-Credential, X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and X-Amz-Expires parameters.",
    ]);
    expect(
      await check(withChange(presigned, { url: url.replace("X-Amz-Date=20261123T120000Z", "X-Amz-Date=2026-11-23") }), SECRET, SIGNED_AT),
    ).toEqual(["AuthorizationQueryParametersError", "X-Amz-Date must be in the ISO8601 Long Format \"yyyyMMdd'T'HHmmss'Z'\""]);
    expect(await check(withChange(presigned, { url: url.replace("X-Amz-Expires=3600", "X-Amz-Expires=3601") }), SECRET, SIGNED_AT)).toEqual(
      [
        "SignatureDoesNotMatch",
        "The request signature we calculated does not match the signature you provided. Check your key and signing method.",
      ],
    );
    expect(await check(withChange(presigned, { headers: { authorization: "AWS4-HMAC-SHA256 Credential=x" } }), SECRET, SIGNED_AT)).toEqual([
      "InvalidArgument",
      "Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter or the Authorization header should be specified.",
    ]);
  });

  it("builds S3's canonical URI: each segment encoded once, %2F and empty segments kept", () => {
    expect(canonicalUri("/test$file.text")).toBe("/test%24file.text");
    expect(canonicalUri("/b/a%20b/c+d")).toBe("/b/a%20b/c%2Bd");
    expect(canonicalUri("/b/x%2Fy//z/")).toBe("/b/x%2Fy//z/");
    expect(canonicalUri("/b/%e2%82%ac")).toBe("/b/%E2%82%AC");
    expect(canonicalUri("/b/tilde~!'()*")).toBe("/b/tilde~%21%27%28%29%2A");
    expect(canonicalUri("/b/bad%zz")).toBe("/b/bad%zz");
  });
});

// The same modules bundled as the Worker is bundled and run in workerd, behind a fetch handler
// standing in for the storage routes; the real @aws-sdk/client-s3 talks to it over HTTP.
const TEST_WORKER = `
import { parseSigV4, verifySigV4, payloadSha256Check } from "./edge/storage/sigv4";
import { awsChunkedDecoder, awsChunkedOptions } from "./edge/storage/chunked";
import { S3Error } from "./edge/storage/errors";
import { s3ErrorResponse } from "./edge/storage/xml";

export default {
  async fetch(request) {
    const url = new URL(request.url);
    const fail = (error) => s3ErrorResponse(error, url.pathname, "test-request", request.method);
    const parsed = parseSigV4(request);
    if (parsed instanceof S3Error) return fail(parsed);
    const refused = await verifySigV4(request, parsed, ${JSON.stringify(SECRET)}, new Date());
    if (refused) return fail(refused);
    let body = request.body ?? new Response("").body;
    if (parsed.payloadMode === "sha256") {
      // The storage routes' check of a signed body's hash (upload-body.ts runs it over the bytes it stores).
      const check = payloadSha256Check(parsed.payloadHash);
      body = body.pipeThrough(new TransformStream({
        transform(chunk, controller) { check.checksum.update(chunk); controller.enqueue(chunk); },
        flush() { check.done(check.checksum.digest()); },
      }));
    }
    else if (parsed.payloadMode.startsWith("streaming")) {
      const options = awsChunkedOptions(request.headers);
      if (options instanceof S3Error) return fail(options);
      body = body.pipeThrough(awsChunkedDecoder(options));
    }
    const digest = new crypto.DigestStream("SHA-256");
    try {
      await body.pipeTo(digest);
    } catch (error) {
      if (error instanceof S3Error) return fail(error);
      throw error;
    }
    const hex = [...new Uint8Array(await digest.digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
    const headers = { ETag: '"' + hex + '"', "x-amz-meta-path": url.pathname, "x-amz-meta-payload": parsed.payloadMode, "x-amz-version-id": parsed.payloadMode };
    if (url.searchParams.get("list-type") === "2") {
      const prefix = url.searchParams.get("prefix") ?? "";
      return new Response('<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>results</Name><Prefix>' + prefix.replace(/&/g, "&amp;").replace(/</g, "&lt;") + '</Prefix><KeyCount>0</KeyCount><IsTruncated>false</IsTruncated></ListBucketResult>', { headers: { "Content-Type": "application/xml" } });
    }
    return new Response(null, { headers });
  },
};
`;

describe("in workerd, with the real @aws-sdk/client-s3", () => {
  let mf: Miniflare;
  let client: S3Client;
  let endpoint: string;

  beforeAll(async () => {
    const built = await esbuild.build({
      ...WORKER_BUILD,
      entryPoints: undefined,
      stdin: { contents: TEST_WORKER, resolveDir: REPO_ROOT, loader: "ts", sourcefile: "storage-test-worker.ts" },
      write: false,
      outfile: "index.js",
    });
    mf = new Miniflare({
      modules: true,
      script: built.outputFiles[0]!.text,
      scriptPath: "index.js",
      compatibilityDate: COMPATIBILITY_DATE,
      compatibilityFlags: ["nodejs_compat"],
      host: "127.0.0.1",
      port: 0,
    });
    endpoint = new URL("/api/cloud/storage", await mf.ready).toString();
    client = new S3Client({
      region: "us-east-1",
      endpoint,
      forcePathStyle: true,
      credentials: { accessKeyId: ACCESS_KEY, secretAccessKey: SECRET },
      requestChecksumCalculation: "WHEN_SUPPORTED",
      maxAttempts: 1,
    });
  });

  afterAll(async () => {
    client?.destroy();
    await mf?.dispose();
  });

  it("verifies HeadObject of awkward keys and sees the path as the SDK sent it", async () => {
    for (const key of ["dir/a b+c.txt", "ünïcødé/€ 1.bin", "literal%2Fpercent", "sub/dir//double-slash", "tilde~!'()*$&=,;@.txt"]) {
      const head = await client.send(new HeadObjectCommand({ Bucket: "results", Key: key }));
      expect(head.Metadata, key).toEqual({ path: `/api/cloud/storage/results/${sdkEncode(key)}`, payload: "sha256" });
    }
  });

  it("verifies ListObjectsV2 with a prefix that needs encoding", async () => {
    const listed = await client.send(new ListObjectsV2Command({ Bucket: "results", Prefix: "job 1/ü+x&y" }));
    expect(listed.Prefix).toBe("job 1/ü+x&y");
  });

  it("decodes and checks a streamed PutObject (aws-chunked, CRC32 trailer) and a buffered one (hex payload hash via DigestStream)", async () => {
    const data = randomBytes(200 * 1024);
    const hex = new Uint8Array(await crypto.subtle.digest("SHA-256", data));
    const expected = `"${Buffer.from(hex).toString("hex")}"`;
    const streamed = await client.send(
      new PutObjectCommand({
        Bucket: "results",
        Key: "job 1/model.bin",
        Body: Readable.from([data.subarray(0, 70_000), data.subarray(70_000)]),
        ContentLength: data.length,
      }),
    );
    expect([streamed.ETag, streamed.VersionId]).toEqual([expected, "streaming-unsigned-trailer"]);
    const buffered = await client.send(new PutObjectCommand({ Bucket: "results", Key: "job 1/model.bin", Body: data }));
    expect([buffered.ETag, buffered.VersionId]).toEqual([expected, "sha256"]);
  });

  it("verifies URLs from getSignedUrl (presigned GET and PUT) fetched without SDK headers", async () => {
    const put = await getSignedUrl(client, new PutObjectCommand({ Bucket: "results", Key: "shared/a b+ü.txt" }), { expiresIn: 300 });
    expect(put).toContain("X-Amz-Content-Sha256=UNSIGNED-PAYLOAD");
    const stored = await fetch(put, { method: "PUT", body: "presigned upload" });
    expect([stored.status, stored.headers.get("x-amz-meta-payload")]).toEqual([200, "unsigned"]);
    const get = await getSignedUrl(client, new GetObjectCommand({ Bucket: "results", Key: "shared/a b+ü.txt" }), { expiresIn: 300 });
    expect((await fetch(get)).status).toBe(200);
    const tampered = await fetch(get.replace("X-Amz-Expires=300", "X-Amz-Expires=301"));
    expect(tampered.status).toBe(403);
    expect(await tampered.text()).toContain("<Code>SignatureDoesNotMatch</Code>");
  });

  it("answers a body that does not match its signed x-amz-content-sha256 with XAmzContentSHA256Mismatch XML", async () => {
    const url = new URL(endpoint);
    const signer = new SignatureV4({
      service: "s3",
      region: "us-east-1",
      credentials: { accessKeyId: ACCESS_KEY, secretAccessKey: SECRET },
      sha256: Sha256,
      uriEscapePath: false,
    });
    const declared = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode("the signed body")));
    const signed = await signer.sign({
      method: "PUT",
      protocol: "http:",
      hostname: url.hostname,
      port: Number(url.port),
      path: "/api/cloud/storage/results/x.txt",
      query: {},
      headers: { host: url.host, "x-amz-content-sha256": Buffer.from(declared).toString("hex"), "content-length": "15" },
    });
    const response = await fetch(new URL(signed.path, endpoint), { method: "PUT", headers: signed.headers, body: "a forged body!!" });
    expect(response.status).toBe(400);
    expect(await response.text()).toBe(
      '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>XAmzContentSHA256Mismatch</Code><Message>The provided &apos;x-amz-content-sha256&apos; header does not match what was computed.</Message><Resource>/api/cloud/storage/results/x.txt</Resource><RequestId>test-request</RequestId></Error>',
    );
  });

  it("refuses the SDK with a wrong secret: SignatureDoesNotMatch reaches it as the error name", async () => {
    const wrong = new S3Client({
      region: "us-east-1",
      endpoint,
      forcePathStyle: true,
      credentials: { accessKeyId: ACCESS_KEY, secretAccessKey: "nope" },
      maxAttempts: 1,
    });
    const error = await wrong
      .send(new ListObjectsV2Command({ Bucket: "results" }))
      .catch((e: Error & { $metadata: { httpStatusCode: number } }) => e);
    wrong.destroy();
    expect([(error as Error).name, (error as Error & { $metadata: { httpStatusCode: number } }).$metadata.httpStatusCode]).toEqual([
      "SignatureDoesNotMatch",
      403,
    ]);
  });
});
