import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** A self-signed certificate for 127.0.0.1 (openssl), in a fresh temp dir: the PEM paths and contents. */
export function selfSignedCert(): { dir: string; certFile: string; keyFile: string; cert: Buffer; key: Buffer } {
  const dir = mkdtempSync(join(tmpdir(), "training-service-tls-"));
  const certFile = join(dir, "cert.pem");
  const keyFile = join(dir, "key.pem");
  execFileSync(
    "openssl",
    ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"].concat([
      "-days",
      "2",
      "-keyout",
      keyFile,
      "-out",
      certFile,
    ]),
    { stdio: "ignore" },
  );
  return { dir, certFile, keyFile, cert: readFileSync(certFile), key: readFileSync(keyFile) };
}
