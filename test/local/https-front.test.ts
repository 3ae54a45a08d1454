// HTTPS on the local host (remote access without a tunnel): with SERVICE_SSL_CERT and SERVICE_SSL_KEY the
// client front serves HTTPS on its port (the real stack, a self-signed certificate), while the
// host's own calls and its runner keep plain HTTP on loopback; a half-set pair, a missing file
// or files that are not a certificate and key stop start-up with one line.
import { spawn } from "node:child_process";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Agent, request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readTlsFiles } from "../../edge/local/host-environment";
import { startStack, StartupError } from "../../edge/local/stack";
import { bundledWorker, startTestStack, tempDataDir, type TestStack } from "../helpers/stack";
import { selfSignedCert } from "../helpers/tls";
import { endWhenDone } from "../helpers/cleanup";

const tls = selfSignedCert();
afterAll(() => rmSync(tls.dir, { recursive: true, force: true }));

describe("a stack started with a certificate", () => {
  let t: TestStack;
  beforeAll(async () => {
    t = await startTestStack(undefined, undefined, { tls: { certFile: tls.certFile, keyFile: tls.keyFile } });
  });
  afterAll(() => t?.stop());

  it("answers over HTTPS on its port, verified against that certificate", async () => {
    expect(t.stack.url.protocol).toBe("https:");
    const trusting = new Agent({ connect: { ca: tls.cert } });
    const answer = await request(new URL("/api/cloud/health/live", t.stack.url), { dispatcher: trusting });
    expect(answer.statusCode).toBe(200);
    expect(await answer.body.json()).toEqual({ status: "ok" });
    // Security headers and the rate-limit headers come through the TLS front as through the plain one.
    expect(answer.headers["x-content-type-options"]).toBe("nosniff");
    await trusting.close();
  });

  it("is refused by a client that does not trust the certificate, and does not speak plain HTTP on that port", async () => {
    const strict = await fetch(new URL("/api/cloud/health/live", t.stack.url)).catch((e: Error) => e);
    expect(strict).toBeInstanceOf(Error);
    expect(String((strict as Error & { cause?: unknown }).cause)).toMatch(/certificate/);
    const plain = await fetch(`http://127.0.0.1:${t.stack.url.port}/api/cloud/health/live`).catch((e: Error) => e);
    expect(plain).toBeInstanceOf(Error);
  });

  it("keeps plain HTTP for the host's own calls on a loopback port of its own", async () => {
    expect(t.stack.loopbackUrl.protocol).toBe("http:");
    expect(t.stack.loopbackUrl.hostname).toBe("127.0.0.1");
    expect(t.stack.loopbackUrl.port).not.toBe(t.stack.url.port);
    expect(await (await fetch(new URL("/api/cloud/health/live", t.stack.loopbackUrl))).json()).toEqual({ status: "ok" });
  });
});

describe("start-up mistakes", () => {
  it("names the missing half when only one of SERVICE_SSL_CERT and SERVICE_SSL_KEY is set", () => {
    expect(() => readTlsFiles({ SERVICE_SSL_CERT: tls.certFile })).toThrow(StartupError);
    expect(() => readTlsFiles({ SERVICE_SSL_CERT: tls.certFile })).toThrow(
      "SERVICE_SSL_CERT is set but SERVICE_SSL_KEY is not: set both (PEM files) to serve HTTPS, or neither",
    );
    expect(() => readTlsFiles({ SERVICE_SSL_KEY: tls.keyFile })).toThrow(/^SERVICE_SSL_KEY is set but SERVICE_SSL_CERT is not/);
    expect(readTlsFiles({})).toBeUndefined();
  });

  it("refuses files that are not a certificate and its key", async () => {
    const garbage = join(tls.dir, "garbage.pem");
    writeFileSync(garbage, "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n");
    const dataDir = tempDataDir();
    const error = await startStack({
      dataDir,
      host: "127.0.0.1",
      port: 0,
      output: () => {},
      tls: { certFile: garbage, keyFile: tls.keyFile },
      workerScript: bundledWorker(),
    }).catch((e: unknown) => e);
    rmSync(dataDir, { recursive: true, force: true });
    expect(error).toBeInstanceOf(StartupError);
    expect((error as Error).message).toMatch(/^SERVICE_SSL_CERT and SERVICE_SSL_KEY do not load as a PEM certificate and its key \(/);
  });

  it("npm start with a certificate file that is not there prints one line naming it and exits 1", async () => {
    const missing = join(tls.dir, "missing-cert.pem");
    const dataDir = tempDataDir();
    const child = spawn(process.execPath, ["--import", "tsx", "edge/local/main.ts"], {
      env: {
        ...process.env,
        SERVICE_HOST: "127.0.0.1",
        SERVICE_PORT: "0",
        SERVICE_DATA_DIR: dataDir,
        SERVICE_LOCAL_RUNNER: "0",
        SERVICE_SSL_CERT: missing,
        SERVICE_SSL_KEY: tls.keyFile,
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    endWhenDone(child);
    let stderr = "";
    child.stderr.on("data", (chunk) => (stderr += chunk));
    const code = await new Promise<number | null>((done) => child.on("exit", done));
    rmSync(dataDir, { recursive: true, force: true });
    expect(code).toBe(1);
    expect(stderr).toBe(`error: SERVICE_SSL_CERT names ${missing}, which cannot be read (ENOENT)\n`);
  });
});
