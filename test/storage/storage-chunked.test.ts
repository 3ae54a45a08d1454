import { randomBytes } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Readable } from "node:stream";
import { PutObjectCommand, S3Client, type ChecksumAlgorithm } from "@aws-sdk/client-s3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { awsChunkedDecoder, awsChunkedOptions, type AwsChunkedOptions } from "../../edge/storage/chunked";
import { createChecksum, toBase64 } from "../../edge/storage/checksums";
import { S3Error } from "../../edge/storage/errors";
import { chunkSigner, parseSigV4, verifySigV4, type ParsedAuth } from "../../edge/storage/sigv4";

// The aws-chunked decoder, fed bodies exactly as @aws-sdk/client-s3 sends them (captured by a
// loopback server standing in for the storage endpoint), AWS's documented signed-chunk example,
// and hand-built broken bodies.

const encoder = new TextEncoder();
const ACCESS_KEY = "AKIDSTORAGETEST";
const SECRET = "storage/test+secret";

interface Captured {
  method: string;
  url: string;
  headers: [string, string][];
  body: Buffer;
}

let server: Server;
let port: number;
const captured: Captured[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const headers: [string, string][] = [];
      for (let i = 0; i < req.rawHeaders.length; i += 2) headers.push([req.rawHeaders[i]!.toLowerCase(), req.rawHeaders[i + 1]!]);
      captured.push({ method: req.method!, url: req.url!, headers, body: Buffer.concat(chunks) });
      res.writeHead(200, { ETag: '"0"' }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  port = (server.address() as AddressInfo).port;
});

afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

/** PutObject through the real SDK with a stream body (what makes it choose aws-chunked). */
async function sdkPut(data: Uint8Array, pieces: number, checksumAlgorithm?: ChecksumAlgorithm): Promise<Captured> {
  const client = new S3Client({
    region: "us-east-1",
    endpoint: `http://127.0.0.1:${port}/api/cloud/storage`,
    forcePathStyle: true,
    credentials: { accessKeyId: ACCESS_KEY, secretAccessKey: SECRET },
    requestChecksumCalculation: "WHEN_SUPPORTED",
    maxAttempts: 1,
  });
  const step = Math.ceil(data.length / pieces);
  const parts = Array.from({ length: pieces }, (_, i) => Buffer.from(data.subarray(i * step, (i + 1) * step)));
  captured.length = 0;
  await client.send(
    new PutObjectCommand({
      Bucket: "results",
      Key: "job 1/out+€.bin",
      Body: Readable.from(parts),
      ContentLength: data.length,
      ChecksumAlgorithm: checksumAlgorithm,
    }),
  );
  client.destroy();
  expect(captured).toHaveLength(1);
  return captured[0]!;
}

function asRequest(capture: Captured): Request {
  return new Request(`http://127.0.0.1:${port}${capture.url}`, { method: capture.method, headers: capture.headers });
}

/** Runs `body` through the decoder in reads of `readSize` bytes; resolves to the decoded bytes. */
async function decode(body: Uint8Array, options: AwsChunkedOptions, readSize = 65536): Promise<Uint8Array> {
  let offset = 0;
  const source = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (offset >= body.length) return controller.close();
      controller.enqueue(body.slice(offset, offset + readSize));
      offset += readSize;
    },
  });
  return new Uint8Array(await new Response(source.pipeThrough(awsChunkedDecoder(options))).arrayBuffer());
}

async function decodeError(body: Uint8Array, options: AwsChunkedOptions, readSize?: number): Promise<S3Error> {
  const error = await decode(body, options, readSize).then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(S3Error);
  return error as S3Error;
}

const UNSIGNED = "STREAMING-UNSIGNED-PAYLOAD-TRAILER";
const crc32Of = (data: Uint8Array) => {
  const crc = createChecksum("crc32");
  crc.update(data);
  return toBase64(crc.digest());
};

/** An unsigned-trailer body built the way the SDK frames it, from explicit chunk sizes. */
function frame(data: Uint8Array, sizes: number[], trailer: string | null): Uint8Array {
  const parts: Uint8Array[] = [];
  let at = 0;
  for (const size of sizes) {
    parts.push(encoder.encode(`${size.toString(16)}\r\n`), data.subarray(at, at + size), encoder.encode("\r\n"));
    at += size;
  }
  parts.push(encoder.encode(trailer === null ? "0\r\n" : `0\r\n${trailer}\r\n\r\n`));
  return Buffer.concat(parts);
}

describe("checksums", () => {
  it('match the catalogue check values over "123456789", fed in pieces', () => {
    const expected = {
      crc32: "cbf43926",
      crc32c: "e3069283",
      crc64nvme: "ae8b14860a799888",
      sha1: "f7c3bc1d808e04732adf679965ccc34ca7ae3441",
    } as const;
    for (const [algorithm, hex] of Object.entries(expected)) {
      const hash = createChecksum(algorithm as keyof typeof expected);
      hash.update(encoder.encode("1234"));
      hash.update(encoder.encode("56789"));
      expect(Buffer.from(hash.digest()).toString("hex"), algorithm).toBe(hex);
    }
  });
});

describe("aws-chunked bodies from @aws-sdk/client-s3", () => {
  it("sends PutObject of a stream as STREAMING-UNSIGNED-PAYLOAD-TRAILER with a CRC32 trailer, signed SigV4 over the /api/cloud/storage path", async () => {
    const data = randomBytes(300 * 1024);
    const capture = await sdkPut(data, 3);
    const headers = new Headers(capture.headers);
    expect(capture.method).toBe("PUT");
    expect(capture.url).toBe("/api/cloud/storage/results/job%201/out%2B%E2%82%AC.bin?x-id=PutObject");
    expect(headers.get("x-amz-content-sha256")).toBe("STREAMING-UNSIGNED-PAYLOAD-TRAILER");
    expect(headers.get("content-encoding")).toBe("aws-chunked");
    expect(headers.get("x-amz-trailer")).toBe("x-amz-checksum-crc32");
    expect(headers.get("x-amz-decoded-content-length")).toBe("307200");
    expect(headers.get("transfer-encoding")).toBe("chunked");
    expect(headers.get("content-length")).toBeNull();
    // The SDK's framing: one chunk per stream piece, then the CRC32 trailer.
    expect(capture.body.subarray(0, 7).toString("latin1")).toBe("19000\r\n");
    const ending = `\r\n0\r\nx-amz-checksum-crc32:${crc32Of(data)}\r\n\r\n`;
    expect(capture.body.subarray(-ending.length).toString("latin1")).toBe(ending);

    const request = asRequest(capture);
    const parsed = parseSigV4(request) as ParsedAuth;
    expect(parsed).toMatchObject({
      kind: "header",
      accessKeyId: ACCESS_KEY,
      region: "us-east-1",
      service: "s3",
      payloadMode: "streaming-unsigned-trailer",
    });
    expect(await verifySigV4(request, parsed, SECRET, new Date())).toBeNull();
    expect((await verifySigV4(request, parsed, SECRET + "x", new Date()))?.code).toBe("SignatureDoesNotMatch");

    const options = awsChunkedOptions(headers);
    expect(options).toEqual({
      contentSha256: UNSIGNED,
      decodedContentLength: 307200,
      trailers: ["x-amz-checksum-crc32"],
      contentEncoding: null,
    });
    expect(Buffer.compare(await decode(capture.body, options as AwsChunkedOptions), data)).toBe(0);
  });

  it("decodes the SDK's body fed one byte per read (every frame boundary split)", async () => {
    const data = randomBytes(3000);
    const capture = await sdkPut(data, 3);
    const options = awsChunkedOptions(new Headers(capture.headers)) as AwsChunkedOptions;
    expect(Buffer.compare(await decode(capture.body, options, 1), data)).toBe(0);
    expect(Buffer.compare(await decode(capture.body, options, 7), data)).toBe(0);
  });

  it.each(["CRC32C", "CRC64NVME", "SHA1", "SHA256"] as const)("verifies the SDK's %s trailer", async (algorithm) => {
    const data = randomBytes(70_000);
    const capture = await sdkPut(data, 2, algorithm);
    const headers = new Headers(capture.headers);
    expect(headers.get("x-amz-trailer")).toBe(`x-amz-checksum-${algorithm.toLowerCase()}`);
    const options = awsChunkedOptions(headers) as AwsChunkedOptions;
    expect(Buffer.compare(await decode(capture.body, options, 1000), data)).toBe(0);
    // The same bytes with the last data byte flipped: framing intact, checksum wrong.
    const corrupted = Buffer.from(capture.body);
    corrupted[corrupted.indexOf("\r\n0\r\n") - 1]! ^= 1;
    const error = await decodeError(corrupted, options);
    expect([error.code, error.message]).toEqual(["BadDigest", `The ${algorithm} you specified did not match the calculated checksum.`]);
  });
});

describe("aws-chunked framing errors", () => {
  const data = encoder.encode("hello, aws-chunked world");
  const trailer = `x-amz-checksum-crc32:${crc32Of(data)}`;
  const options: AwsChunkedOptions = { contentSha256: UNSIGNED, decodedContentLength: data.length, trailers: ["x-amz-checksum-crc32"] };
  const good = frame(data, [5, 19], trailer);

  it("accepts the well-formed body, in any read size", async () => {
    for (const size of [1, 2, 3, 5, 8, 1000])
      expect(new TextDecoder().decode(await decode(good, options, size))).toBe("hello, aws-chunked world");
  });

  it("refuses a corrupted trailing checksum with BadDigest", async () => {
    const bad = frame(data, [5, 19], `x-amz-checksum-crc32:${crc32Of(encoder.encode("something else"))}`);
    const error = await decodeError(bad, options);
    expect([error.code, error.status, error.message]).toEqual([
      "BadDigest",
      400,
      "The CRC32 you specified did not match the calculated checksum.",
    ]);
  });

  it("refuses a body cut anywhere before its final blank line with IncompleteBody", async () => {
    for (let cut = 0; cut < good.length; cut++) {
      const error = await decodeError(good.subarray(0, cut), options, 3);
      // Cutting inside the trailer section can leave a complete line; either way, incomplete.
      expect(error.code, `cut at ${cut}`).toBe("IncompleteBody");
    }
  });

  it("refuses a decoded length other than x-amz-decoded-content-length", async () => {
    const short = await decodeError(good, { ...options, decodedContentLength: data.length + 1 });
    expect([short.code, short.message]).toEqual(["IncompleteBody", "The decoded body has 24 bytes; x-amz-decoded-content-length says 25."]);
    const long = await decodeError(good, { ...options, decodedContentLength: 10 });
    expect([long.code, long.message]).toEqual([
      "InvalidRequest",
      "The decoded body is longer than x-amz-decoded-content-length (10 bytes).",
    ]);
  });

  it("refuses malformed framing with InvalidRequest", async () => {
    const cases: [string, string][] = [
      ["zz\r\nhello\r\n0\r\n\r\n", 'Malformed aws-chunked body: "zz" is not a chunk size line.'],
      [
        "5\r\nhello!\r\n0\r\n\r\n",
        "Malformed aws-chunked body: chunk data is not followed by \\r\\n (does the chunk size match its data?).",
      ],
      ["5\r\nhello\r\n0\r\n\r\nextra", "Malformed aws-chunked body: bytes follow the end of the body."],
      [`${"0".repeat(5000)}\r\n`, "Malformed aws-chunked body: a framing line is longer than 4096 bytes."],
    ];
    for (const [body, message] of cases) {
      const error = await decodeError(encoder.encode(body), { contentSha256: UNSIGNED }, 2);
      expect([error.code, error.message]).toEqual(["InvalidRequest", message]);
    }
  });

  it("refuses a missing, unannounced or garbled trailer with MalformedTrailerError", async () => {
    const missing = await decodeError(Buffer.concat([frame(data, [24], null), encoder.encode("\r\n")]), options);
    expect([missing.code, missing.message]).toEqual([
      "MalformedTrailerError",
      "The body lacks the trailer x-amz-checksum-crc32 announced in x-amz-trailer.",
    ]);
    const unannounced = await decodeError(frame(data, [24], trailer), { contentSha256: UNSIGNED });
    expect([unannounced.code, unannounced.message]).toEqual([
      "MalformedTrailerError",
      "The trailer x-amz-checksum-crc32 was not announced in x-amz-trailer.",
    ]);
    const garbled = await decodeError(frame(data, [24], "no colon here"), options);
    expect(garbled.code).toBe("MalformedTrailerError");
  });

  it('accepts the SDK\'s checksum-less ending ("0\\r\\n" and nothing after) and an empty body', async () => {
    expect(new TextDecoder().decode(await decode(frame(data, [24], null), { contentSha256: UNSIGNED, decodedContentLength: 24 }))).toBe(
      "hello, aws-chunked world",
    );
    const empty = frame(new Uint8Array(0), [], `x-amz-checksum-crc32:${crc32Of(new Uint8Array(0))}`);
    expect((await decode(empty, { ...options, decodedContentLength: 0 })).length).toBe(0);
  });

  it("reads its options from headers and refuses unsupported trailers", () => {
    const headers = new Headers({
      "x-amz-content-sha256": UNSIGNED,
      "content-encoding": "aws-chunked, gzip",
      "x-amz-trailer": "x-amz-checksum-crc32c",
      "x-amz-decoded-content-length": "12",
    });
    expect(awsChunkedOptions(headers)).toEqual({
      contentSha256: UNSIGNED,
      decodedContentLength: 12,
      trailers: ["x-amz-checksum-crc32c"],
      contentEncoding: "gzip",
    });
    headers.set("x-amz-trailer", "x-amz-checksum-md5");
    expect(awsChunkedOptions(headers)).toMatchObject({
      code: "InvalidRequest",
      message: "The value specified in the x-amz-trailer header is not supported: x-amz-checksum-md5",
    });
    headers.set("x-amz-content-sha256", "UNSIGNED-PAYLOAD");
    expect(awsChunkedOptions(headers)).toMatchObject({ code: "InvalidArgument" });
  });
});

describe("signed aws-chunked bodies (STREAMING-AWS4-HMAC-SHA256-PAYLOAD)", () => {
  // AWS's documented example: "Signature Calculations for the Authorization Header: Transferring
  // Payload in Multiple Chunks". 66,560 bytes of "a" in chunks of 65,536 and 1,024.
  const seedRequest = new Request("http://s3.amazonaws.com/examplebucket/chunkObject.txt", {
    method: "PUT",
    headers: {
      host: "s3.amazonaws.com",
      "x-amz-date": "20130524T000000Z",
      "x-amz-storage-class": "REDUCED_REDUNDANCY",
      "x-amz-content-sha256": "STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
      "content-encoding": "aws-chunked",
      "x-amz-decoded-content-length": "66560",
      "content-length": "66824",
      authorization:
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request," +
        "SignedHeaders=content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;x-amz-storage-class," +
        "Signature=4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9",
    },
  });
  const secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
  const chunkSignatures = [
    "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648",
    "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497",
    "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9",
  ];
  const body = Buffer.concat([
    encoder.encode(`10000;chunk-signature=${chunkSignatures[0]}\r\n`),
    Buffer.alloc(65536, "a"),
    encoder.encode(`\r\n400;chunk-signature=${chunkSignatures[1]}\r\n`),
    Buffer.alloc(1024, "a"),
    encoder.encode(`\r\n0;chunk-signature=${chunkSignatures[2]}\r\n\r\n`),
  ]);

  async function signedOptions(): Promise<AwsChunkedOptions> {
    const parsed = parseSigV4(seedRequest) as ParsedAuth;
    expect(await verifySigV4(seedRequest, parsed, secret, new Date("2013-05-24T00:05:00Z"))).toBeNull();
    const options = awsChunkedOptions(seedRequest.headers) as AwsChunkedOptions;
    return { ...options, signer: chunkSigner(parsed, secret) };
  }

  it("verifies AWS's example: seed signature, both chunk signatures and the final one", async () => {
    expect(body.length).toBe(66824);
    const options = await signedOptions();
    const decoded = await decode(body, options, 4096);
    expect(decoded.length).toBe(66560);
    expect(decoded.every((b) => b === 0x61)).toBe(true);
    expect((await decode(body, options, 1)).length).toBe(66560);
  });

  it("refuses altered chunk data, a wrong chunk signature, and a chunk without one", async () => {
    const options = await signedOptions();
    const altered = Buffer.from(body);
    altered[66_000] = 0x62;
    const error = await decodeError(altered, options);
    expect([error.code, error.status, error.message]).toEqual([
      "SignatureDoesNotMatch",
      403,
      "The signature of chunk ending at byte 66560 does not match.",
    ]);
    const swapped = Buffer.from(body.toString("latin1").replace(chunkSignatures[0]!, chunkSignatures[1]!), "latin1");
    expect((await decodeError(swapped, options)).code).toBe("SignatureDoesNotMatch");
    const unsigned = Buffer.from(body.toString("latin1").replace(`;chunk-signature=${chunkSignatures[2]}`, ""), "latin1");
    expect((await decodeError(unsigned, options)).message).toBe(
      "Malformed aws-chunked body: a chunk of a signed payload lacks its chunk-signature.",
    );
    expect((await decodeError(body, { ...options, signer: chunkSigner(parseSigV4(seedRequest) as ParsedAuth, "wrong") })).code).toBe(
      "SignatureDoesNotMatch",
    );
  });

  it("checks the trailer signature of STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER", async () => {
    // No stock JS client sends this variant; the body is signed here with the same chain, so this
    // shows the decoder's chain and trailer handling hang together, not agreement with AWS.
    const signer = chunkSigner(parseSigV4(seedRequest) as ParsedAuth, secret);
    const data = encoder.encode("trailer-signed payload");
    const sha256Hex = (bytes: Uint8Array) => {
      const hash = createChecksum("sha256");
      hash.update(bytes);
      return Buffer.from(hash.digest()).toString("hex");
    };
    const empty = sha256Hex(new Uint8Array(0));
    const first = await signer.sign(
      ["AWS4-HMAC-SHA256-PAYLOAD", signer.amzDate, signer.scope, signer.seedSignature, empty, sha256Hex(data)].join("\n"),
    );
    const last = await signer.sign(["AWS4-HMAC-SHA256-PAYLOAD", signer.amzDate, signer.scope, first, empty, empty].join("\n"));
    const checksum = `x-amz-checksum-crc32:${crc32Of(data)}`;
    const trailerSig = await signer.sign(
      ["AWS4-HMAC-SHA256-TRAILER", signer.amzDate, signer.scope, last, sha256Hex(encoder.encode(checksum + "\n"))].join("\n"),
    );
    const build = (sig: string) =>
      Buffer.concat([
        encoder.encode(`16;chunk-signature=${first}\r\n`),
        data,
        encoder.encode(`\r\n0;chunk-signature=${last}\r\n${checksum}\r\nx-amz-trailer-signature:${sig}\r\n\r\n`),
      ]);
    const options: AwsChunkedOptions = {
      contentSha256: "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER",
      trailers: ["x-amz-checksum-crc32"],
      decodedContentLength: 22,
      signer,
    };
    expect(new TextDecoder().decode(await decode(build(trailerSig), options, 5))).toBe("trailer-signed payload");
    expect((await decodeError(build(first), options)).message).toBe("The trailer signature does not match.");
  });
});
