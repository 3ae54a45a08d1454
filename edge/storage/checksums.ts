import { createHash } from "node:crypto";
import { crc32 } from "node:zlib";
import { Crc32c } from "@aws-crypto/crc32c";
import { constantTimeEqual } from "../auth/crypto";
import { S3Error } from "./errors";

/**
 * The checksums S3 clients attach to uploads (`x-amz-checksum-<name>`, as a header or as an
 * aws-chunked trailer), computed incrementally so a body is checked while it streams through.
 * Web Crypto's `digest` only hashes a whole buffer, hence incremental hashers: zlib's CRC32 and
 * node:crypto's SHA-1, SHA-256 and MD5 (native in workerd with nodejs_compat, and in Node;
 * synchronous, so hashing a chunk costs no promise), AWS's own CRC32C, and CRC64/NVME by hand.
 */
export type ChecksumAlgorithm = "crc32" | "crc32c" | "crc64nvme" | "sha1" | "sha256";

export interface IncrementalChecksum {
  update(bytes: Uint8Array): void;
  /** The checksum as S3 transmits it: big-endian bytes (CRCs) or the raw digest. */
  digest(): Uint8Array;
}

const ALGORITHMS: readonly ChecksumAlgorithm[] = ["crc32", "crc32c", "crc64nvme", "sha1", "sha256"];

/**
 * The algorithm of an `x-amz-checksum-*` header name, or null for any other name.
 *
 * @example
 * checksumAlgorithmOfHeader("x-amz-checksum-crc32"); // "crc32"
 */
export function checksumAlgorithmOfHeader(name: string): ChecksumAlgorithm | null {
  const lower = name.trim().toLowerCase();
  if (!lower.startsWith("x-amz-checksum-")) return null;
  const algorithm = lower.slice("x-amz-checksum-".length);
  return (ALGORITHMS as readonly string[]).includes(algorithm) ? (algorithm as ChecksumAlgorithm) : null;
}

/**
 * A fresh incremental hasher for `algorithm`.
 *
 * @example
 * const crc = createChecksum("crc32");
 * crc.update(new TextEncoder().encode("hello"));
 * toBase64(crc.digest()); // "NhCmhg=="
 */
export function createChecksum(algorithm: ChecksumAlgorithm): IncrementalChecksum {
  switch (algorithm) {
    case "crc32":
      return fastCrc32();
    case "crc32c":
      return crcChecksum(new Crc32c());
    case "crc64nvme":
      return new Crc64Nvme();
    case "sha1":
      return nativeHash("sha1");
    case "sha256":
      return nativeHash("sha256");
  }
}

/**
 * An incremental MD5: S3's ETag of an uploaded part (not one of the x-amz-checksum algorithms).
 *
 * @example
 * const md5 = md5Checksum();
 * md5.update(new TextEncoder().encode("hello"));
 * toHex(md5.digest()); // "5d41402abc4b2a76b9719d911017c592"
 */
export function md5Checksum(): IncrementalChecksum {
  return nativeHash("md5");
}

/**
 * node:crypto's hash (BoringSSL's, in workerd): as fast per byte as workerd's crypto.DigestStream
 * and synchronous, so the upload loop feeds it without a promise per chunk; noble's JavaScript
 * SHA-256, used before, ran at about 60 MB/s.
 */
function nativeHash(algorithm: "md5" | "sha1" | "sha256"): IncrementalChecksum {
  const hash = createHash(algorithm);
  return { update: (bytes) => void hash.update(bytes), digest: () => new Uint8Array(hash.digest()) };
}

/**
 * CRC32, the checksum the SDKs and the AWS CLI send by default, on every part of every upload:
 * zlib's, native in workerd (nodejs_compat) and Node. Measured in workerd it is the difference
 * between CRC32 taking most of the Worker's time during an upload and hardly showing: pure-JS
 * tables (crc-32, @aws-crypto/crc32) ran at 32 to 650 MB/s in Node and slower still in workerd.
 */
function fastCrc32(): IncrementalChecksum {
  let crc = 0;
  return {
    update: (bytes) => void (crc = crc32(bytes, crc)),
    digest: () => {
      const out = new Uint8Array(4);
      new DataView(out.buffer).setUint32(0, crc >>> 0);
      return out;
    },
  };
}

function crcChecksum(crc: { update(data: Uint8Array): unknown; digest(): number }): IncrementalChecksum {
  return {
    update: (bytes) => void crc.update(bytes),
    digest: () => {
      const out = new Uint8Array(4);
      new DataView(out.buffer).setUint32(0, crc.digest() >>> 0);
      return out;
    },
  };
}

// CRC-64/NVME (reflected polynomial 0x9a6c9329ac4bc9b5, init and xorout all ones), the default
// checksum of the S3 console and of SDKs that ask for "CRC64NVME". No small maintained JS package
// exports it (the AWS SDK's copy is internal), so it is written here, byte-at-a-time over two
// 32-bit halves: BigInt arithmetic would be tens of times slower.
const CRC64_LO = new Uint32Array(256);
const CRC64_HI = new Uint32Array(256);
{
  const polyLo = 0xac4bc9b5;
  const polyHi = 0x9a6c9329;
  for (let n = 0; n < 256; n++) {
    let lo = n;
    let hi = 0;
    for (let bit = 0; bit < 8; bit++) {
      const carry = lo & 1;
      lo = ((lo >>> 1) | ((hi & 1) << 31)) >>> 0;
      hi = hi >>> 1;
      if (carry) {
        lo = (lo ^ polyLo) >>> 0;
        hi = (hi ^ polyHi) >>> 0;
      }
    }
    CRC64_LO[n] = lo;
    CRC64_HI[n] = hi;
  }
}

class Crc64Nvme implements IncrementalChecksum {
  #lo = 0xffffffff;
  #hi = 0xffffffff;

  update(bytes: Uint8Array): void {
    let lo = this.#lo;
    let hi = this.#hi;
    for (let i = 0; i < bytes.length; i++) {
      const index = (lo ^ bytes[i]!) & 0xff;
      lo = ((lo >>> 8) | (hi << 24)) ^ CRC64_LO[index]!;
      hi = (hi >>> 8) ^ CRC64_HI[index]!;
    }
    this.#lo = lo >>> 0;
    this.#hi = hi >>> 0;
  }

  digest(): Uint8Array {
    const out = new Uint8Array(8);
    const view = new DataView(out.buffer);
    view.setUint32(0, ~this.#hi >>> 0);
    view.setUint32(4, ~this.#lo >>> 0);
    return out;
  }
}

/**
 * Base64 as S3 writes checksums (x-amz-checksum-crc32: "NhCmhg==").
 *
 * @example
 * toBase64(new Uint8Array([0x36, 0x10, 0xa6, 0x86])); // "NhCmhg=="
 */
export function toBase64(bytes: Uint8Array): string {
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary);
}

/**
 * Lower-case hex, as SigV4 writes hashes and signatures.
 *
 * @example
 * toHex(new Uint8Array([0, 255])); // "00ff"
 */
export function toHex(bytes: Uint8Array): string {
  let hex = "";
  for (const byte of bytes) hex += byte.toString(16).padStart(2, "0");
  return hex;
}

/**
 * A check on an upload's body: `checksum` is fed every byte, and once the body has ended `done`
 * gets the digest and throws (an S3Error) to refuse the body, or keeps it (an ETag).
 */
export interface BodyCheck {
  checksum: IncrementalChecksum;
  done(digest: Uint8Array): void;
}

/**
 * The check of an `x-amz-checksum-*` header's value (base64): BadDigest when the body's
 * checksum differs.
 *
 * @example
 * const check = checksumHeaderCheck("crc32", "x-amz-checksum-crc32", "NhCmhg==");
 */
export function checksumHeaderCheck(algorithm: ChecksumAlgorithm, header: string, expected: string): BodyCheck {
  return {
    checksum: createChecksum(algorithm),
    done(digest) {
      if (!constantTimeEqual(toBase64(digest), expected.trim()))
        throw new S3Error("BadDigest", `The ${header} you specified did not match the calculated checksum.`);
    },
  };
}
