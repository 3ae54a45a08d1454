import { createHash } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";

/*
 * A minimal S3-compatible server for tests: path-style PutObject, GetObject and HeadObject. Any
 * SigV4 Authorization header is accepted (not verified) but recorded, with the access key id
 * parsed from it, so a test can tell which credentials a delivery used. aws-chunked bodies (the
 * AWS SDKs' default checksummed uploads) are decoded so the stored object is the payload itself.
 */

export interface StoredObject {
  bytes: Buffer;
  contentType: string | null;
  /** The access key id of the request that wrote it (null: unsigned). */
  accessKeyId: string | null;
}

export interface ObjectStoreRequest {
  method: string;
  path: string;
  authorization: string | null;
  accessKeyId: string | null;
}

export interface FakeObjectStore {
  url: string;
  /** Keyed "bucket/key". */
  objects: Map<string, StoredObject>;
  requests: ObjectStoreRequest[];
  stop(): Promise<void>;
}

/**
 * Starts the store on 127.0.0.1 (a free port).
 *
 * @example
 * const store = await startFakeObjectStore({ buckets: ["models"] });
 * // ... a job delivers to store.url, bucket "models"
 * store.objects.get("models/job-1/model.safetensors")?.accessKeyId;
 */
export async function startFakeObjectStore(
  options: {
    /** When set, only these buckets exist (others: 404 NoSuchBucket). */
    buckets?: string[];
    /** When set, requests signed with another access key id get 403 InvalidAccessKeyId. */
    accessKeyId?: string;
  } = {},
): Promise<FakeObjectStore> {
  const objects = new Map<string, StoredObject>();
  const requests: ObjectStoreRequest[] = [];

  const server = http.createServer(async (req, res) => {
    const url = new URL(req.url ?? "/", "http://store");
    const authorization = req.headers.authorization ?? null;
    const accessKeyId =
      /Credential=([^/,\s]+)\//.exec(authorization ?? "")?.[1] ?? url.searchParams.get("X-Amz-Credential")?.split("/")[0] ?? null;
    requests.push({ method: req.method ?? "", path: url.pathname, authorization, accessKeyId });
    const body = await readBody(req).catch(() => null);
    if (!body) return;

    const [, bucket = "", ...rest] = url.pathname.split("/");
    const key = decodeURIComponent(rest.join("/"));
    if (!bucket || !key) return s3Error(res, 400, "InvalidRequest", "Only path-style object requests are served");
    if (options.buckets && !options.buckets.includes(bucket))
      return s3Error(res, 404, "NoSuchBucket", `The bucket ${bucket} does not exist`);
    if (options.accessKeyId && accessKeyId !== options.accessKeyId)
      return s3Error(res, 403, "InvalidAccessKeyId", "The access key id you provided does not exist in our records");

    const id = `${bucket}/${key}`;
    if (req.method === "PUT") {
      const encoding = String(req.headers["content-encoding"] ?? "");
      const bytes = encoding.split(",").some((e) => e.trim() === "aws-chunked") ? decodeAwsChunked(body) : body;
      objects.set(id, { bytes, contentType: req.headers["content-type"] ?? null, accessKeyId });
      res.writeHead(200, { ETag: `"${createHash("md5").update(bytes).digest("hex")}"` });
      return res.end();
    }
    if (req.method === "GET" || req.method === "HEAD") {
      const object = objects.get(id);
      if (!object) return s3Error(res, 404, "NoSuchKey", "The specified key does not exist.");
      res.writeHead(200, {
        "Content-Type": object.contentType ?? "application/octet-stream",
        "Content-Length": object.bytes.length,
        ETag: `"${createHash("md5").update(object.bytes).digest("hex")}"`,
      });
      return res.end(req.method === "GET" ? object.bytes : undefined);
    }
    s3Error(res, 405, "MethodNotAllowed", `${req.method} is not served by this store`);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    objects,
    requests,
    stop: () => closeServer(server),
  };
}

/** Reads a whole request body (test servers only: their bodies are small). */
export function readBody(req: http.IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => resolve(Buffer.concat(chunks)));
    req.on("error", reject);
  });
}

/** Closes a test server, its idle and hanging connections included. */
export function closeServer(server: http.Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

// `<hex size>[;chunk-signature=...]\r\n<data>\r\n` ... `0\r\n<trailers>\r\n\r\n`.
function decodeAwsChunked(body: Buffer): Buffer {
  const parts: Buffer[] = [];
  let at = 0;
  while (at < body.length) {
    const lineEnd = body.indexOf("\r\n", at);
    if (lineEnd < 0) break;
    const size = parseInt(body.subarray(at, lineEnd).toString("latin1").split(";")[0]!, 16);
    if (!Number.isFinite(size) || size === 0) break;
    parts.push(body.subarray(lineEnd + 2, lineEnd + 2 + size));
    at = lineEnd + 2 + size + 2;
  }
  return Buffer.concat(parts);
}

function s3Error(res: http.ServerResponse, status: number, code: string, message: string): void {
  res.writeHead(status, { "Content-Type": "application/xml" });
  res.end(`<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>${message}</Message></Error>`);
}
