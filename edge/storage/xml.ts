import { readLimitedText as readCapped } from "../limited-body";
import { S3Error } from "./errors";

/**
 * The little XML the storage endpoint speaks: S3 error documents out, the
 * CompleteMultipartUpload part list in. Both shapes are fixed, so there is no XML library.
 */

/**
 * Escapes text for XML element content and attribute values. Characters XML 1.0 cannot carry at
 * all (most C0 controls, lone surrogates, U+FFFE/U+FFFF) become U+FFFD, so the document stays
 * well-formed whatever an object key holds.
 *
 * @example
 * xmlEscape(`a<b & "c"`); // "a&lt;b &amp; &quot;c&quot;"
 */
export function xmlEscape(text: string): string {
  return text
    .replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&apos;" })[c]!)
    .replace(
      /[\u0000-\u0008\u000b\u000c\u000e-\u001f\ufffe\uffff]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g,
      "\ufffd",
    );
}

/**
 * An S3 error document, as clients parse it (`<Error><Code>` is what boto3 and the SDKs branch on).
 *
 * @example
 * s3ErrorXml("NoSuchKey", "The specified key does not exist.", "/bucket/key", "4442587FB7D0A2F9");
 */
export function s3ErrorXml(code: string, message: string, resource: string, requestId: string): string {
  return (
    '<?xml version="1.0" encoding="UTF-8"?>\n' +
    `<Error><Code>${xmlEscape(code)}</Code><Message>${xmlEscape(message)}</Message>` +
    `<Resource>${xmlEscape(resource)}</Resource><RequestId>${xmlEscape(requestId)}</RequestId></Error>`
  );
}

/**
 * The HTTP response for an S3Error: its status, the XML document, and the request id in
 * x-amz-request-id where S3 puts it. HEAD requests get the status alone, as from S3.
 *
 * @example
 * return s3ErrorResponse(new S3Error("AccessDenied", "Access Denied"), "/bucket/key", requestId);
 */
export function s3ErrorResponse(error: S3Error, resource: string, requestId: string, method = "GET"): Response {
  const headers = { "Content-Type": "application/xml", "x-amz-request-id": requestId };
  return new Response(method === "HEAD" ? null : s3ErrorXml(error.code, error.message, resource, requestId), {
    status: error.status,
    headers,
  });
}

export interface CompletedPart {
  partNumber: number;
  /** Without the quotes clients wrap it in, as R2's uploadPart returns it. */
  etag: string;
  /** Per-part checksums the client sent (boto3 >= 1.36 sends ChecksumCRC32), by element name. */
  checksums: Partial<Record<"ChecksumCRC32" | "ChecksumCRC32C" | "ChecksumCRC64NVME" | "ChecksumSHA1" | "ChecksumSHA256", string>>;
}

/** S3 allows at most 10,000 parts; with whitespace and checksums that is well under 4 MiB of XML. */
export const MAX_COMPLETE_MULTIPART_BYTES = 4 * 1024 * 1024;
export const MAX_PARTS = 10_000;

const MALFORMED = "The XML you provided was not well-formed or did not validate against our published schema";
const PART_FIELDS = new Set([
  "PartNumber",
  "ETag",
  "ChecksumCRC32",
  "ChecksumCRC32C",
  "ChecksumCRC64NVME",
  "ChecksumSHA1",
  "ChecksumSHA256",
]);

/**
 * A request body as text, refused with MaxMessageLengthExceeded as soon as it passes `maxBytes`
 * (edge/limited-body.ts, in S3's terms).
 *
 * @example
 * const xml = await readLimitedText(request.body, MAX_COMPLETE_MULTIPART_BYTES);
 * if (xml instanceof S3Error) return s3ErrorResponse(xml, path, requestId);
 */
export async function readLimitedText(body: ReadableStream<Uint8Array> | null, maxBytes: number): Promise<string | S3Error> {
  return (
    (await readCapped(body, maxBytes)) ?? new S3Error("MaxMessageLengthExceeded", `Your request was too big: at most ${maxBytes} bytes.`)
  );
}

/**
 * Parses a CompleteMultipartUpload body:
 * `<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>"..."</ETag></Part>...`.
 * Accepts an XML declaration, a namespace on the root, whitespace between elements, entity
 * references in values, and the per-part checksum elements; anything else in the structure is
 * MalformedXML. Part numbers must be 1 to 10,000 and strictly ascending (InvalidPartOrder).
 *
 * @example
 * parseCompleteMultipartUpload('<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>"a1"</ETag></Part></CompleteMultipartUpload>');
 * // [{ partNumber: 1, etag: "a1", checksums: {} }]
 */
export function parseCompleteMultipartUpload(xml: string): CompletedPart[] | S3Error {
  if (xml.length > MAX_COMPLETE_MULTIPART_BYTES)
    return new S3Error("MaxMessageLengthExceeded", `Your request was too big: at most ${MAX_COMPLETE_MULTIPART_BYTES} bytes.`);
  const malformed = (why: string) => new S3Error("MalformedXML", `${MALFORMED}: ${why}.`);
  const root =
    /^\uFEFF?\s*(?:<\?xml\s[^?]*\?>\s*)?<CompleteMultipartUpload(?:\s+xmlns(?::\w+)?\s*=\s*(?:"[^"]*"|'[^']*'))*\s*>([\s\S]*)<\/CompleteMultipartUpload>\s*$/.exec(
      xml,
    );
  if (!root) return malformed("the document is not one CompleteMultipartUpload element");
  const body = root[1]!;
  const partPattern = /\s*<Part>([\s\S]*?)<\/Part>\s*/y;
  const fieldPattern = /\s*<([A-Za-z0-9]+)>([^<]*)<\/\1>\s*/y;
  const partScan = stickyScan(partPattern, body);
  if ("unexpected" in partScan) return malformed(`unexpected content "${partScan.unexpected}"`);
  if (partScan.matches.length > MAX_PARTS) return malformed(`more than ${MAX_PARTS} parts`);
  const parts: CompletedPart[] = [];
  for (const part of partScan.matches) {
    const fieldScan = stickyScan(fieldPattern, part[1]!);
    if ("unexpected" in fieldScan) return malformed(`unexpected content in a Part: "${fieldScan.unexpected}"`);
    const fields = new Map<string, string>();
    for (const field of fieldScan.matches) {
      const [, name, raw] = field as unknown as [string, string, string];
      if (!PART_FIELDS.has(name)) return malformed(`a Part has an unknown element <${name}>`);
      if (fields.has(name)) return malformed(`a Part has two <${name}> elements`);
      const value = unescapeXml(raw);
      if (value === null) return malformed(`<${name}> holds an unknown entity`);
      fields.set(name, value.trim());
    }
    const number = fields.get("PartNumber");
    const etag = fields.get("ETag");
    if (number === undefined || etag === undefined) return malformed("every Part needs a PartNumber and an ETag");
    if (!/^\d{1,5}$/.test(number) || Number(number) < 1 || Number(number) > MAX_PARTS) {
      return new S3Error(
        "InvalidArgument",
        `Part number must be an integer between 1 and ${MAX_PARTS}, inclusive (got "${number.slice(0, 20)}").`,
      );
    }
    const partNumber = Number(number);
    if (parts.length && partNumber <= parts.at(-1)!.partNumber) {
      return new S3Error(
        "InvalidPartOrder",
        "The list of parts was not in ascending order. The parts list must be specified in order by part number.",
      );
    }
    const checksums: CompletedPart["checksums"] = {};
    for (const [name, value] of fields) if (name.startsWith("Checksum")) checksums[name as keyof CompletedPart["checksums"]] = value;
    parts.push({ partNumber, etag: etag.replace(/^"(.*)"$/, "$1"), checksums });
  }
  if (parts.length === 0) return malformed("there are no parts");
  return parts;
}

/**
 * The matches of a sticky (`y`) `pattern` laid end to end over `text`, or the first stretch that
 * none covers (trailing whitespace is allowed). Every pattern given must match at least a character.
 */
function stickyScan(pattern: RegExp, text: string): { matches: RegExpExecArray[] } | { unexpected: string } {
  const matches: RegExpExecArray[] = [];
  pattern.lastIndex = 0;
  while (pattern.lastIndex < text.length) {
    const at = pattern.lastIndex;
    const match = pattern.exec(text);
    if (!match) {
      if (/^\s*$/.test(text.slice(at))) break;
      return { unexpected: text.slice(at, at + 40).trim() };
    }
    matches.push(match);
  }
  return { matches };
}

const ENTITY = /&(#x[0-9a-fA-F]{1,6}|#\d{1,7}|amp|lt|gt|quot|apos);/g;
const NAMED: Record<string, string> = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'" };

// Element text with its entity references resolved, or null when an `&` starts none of XML's.
function unescapeXml(text: string): string | null {
  if (text.replace(ENTITY, "").includes("&")) return null;
  let invalid = false;
  const out = text.replace(ENTITY, (_, entity: string) => {
    if (entity[0] !== "#") return NAMED[entity]!;
    const code = entity[1] === "x" ? parseInt(entity.slice(2), 16) : parseInt(entity.slice(1), 10);
    if (code > 0x10ffff) invalid = true;
    return invalid ? "" : String.fromCodePoint(code);
  });
  return invalid ? null : out;
}
