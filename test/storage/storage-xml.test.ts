import { describe, expect, it } from "vitest";
import { S3Error } from "../../edge/storage/errors";
import {
  MAX_COMPLETE_MULTIPART_BYTES,
  parseCompleteMultipartUpload,
  readLimitedText,
  s3ErrorResponse,
  s3ErrorXml,
  xmlEscape,
} from "../../edge/storage/xml";

// S3 error documents out, CompleteMultipartUpload part lists in.

describe("S3 error XML", () => {
  it("escapes markup, quotes and characters XML cannot carry", () => {
    expect(xmlEscape(`a<b> & "c" 'd'`)).toBe("a&lt;b&gt; &amp; &quot;c&quot; &apos;d&apos;");
    expect(xmlEscape("nul\u0000 bell\u0007 tab\t nl\n € 😀")).toBe("nul\ufffd bell\ufffd tab\t nl\n € 😀");
    expect(xmlEscape("lone \ud800 high, lone \udc00 low")).toBe("lone \ufffd high, lone \ufffd low");
  });

  it("writes the Error document S3 clients parse", () => {
    expect(s3ErrorXml("NoSuchKey", "The specified key does not exist.", "/results/a&b <1>.txt", "req-1")).toBe(
      '<?xml version="1.0" encoding="UTF-8"?>\n' +
        "<Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message><Resource>/results/a&amp;b &lt;1&gt;.txt</Resource><RequestId>req-1</RequestId></Error>",
    );
  });

  it("answers an S3Error with its status, XML and request id; HEAD without a body", async () => {
    const response = s3ErrorResponse(new S3Error("SignatureDoesNotMatch", "No."), "/b/k", "req-2");
    expect([response.status, response.headers.get("content-type"), response.headers.get("x-amz-request-id")]).toEqual([
      403,
      "application/xml",
      "req-2",
    ]);
    expect(await response.text()).toBe(
      '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SignatureDoesNotMatch</Code><Message>No.</Message><Resource>/b/k</Resource><RequestId>req-2</RequestId></Error>',
    );
    const head = s3ErrorResponse(new S3Error("AccessDenied", "Access Denied"), "/b/k", "req-3", "HEAD");
    expect([head.status, await head.text()]).toEqual([403, ""]);
  });
});

describe("CompleteMultipartUpload bodies", () => {
  it("reads the parts boto3 sends: namespace, declaration, quoted ETags and CRC32 checksums", () => {
    const body = `<?xml version="1.0" encoding="UTF-8"?>
<CompleteMultipartUpload xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Part><ETag>"7778aef83f66abc1fa1e8477f296d394"</ETag><PartNumber>1</PartNumber><ChecksumCRC32>AAAAAA==</ChecksumCRC32></Part>
  <Part>
    <ETag>"9b2cf535f27731c974343645a3985328"</ETag>
    <PartNumber>2</PartNumber>
    <ChecksumCRC32>3tTUWw==</ChecksumCRC32>
  </Part>
</CompleteMultipartUpload>`;
    expect(parseCompleteMultipartUpload(body)).toEqual([
      { partNumber: 1, etag: "7778aef83f66abc1fa1e8477f296d394", checksums: { ChecksumCRC32: "AAAAAA==" } },
      { partNumber: 2, etag: "9b2cf535f27731c974343645a3985328", checksums: { ChecksumCRC32: "3tTUWw==" } },
    ]);
  });

  it("resolves entity references, as the JS SDK escapes the ETag's quotes", () => {
    const body =
      "<CompleteMultipartUpload><Part><PartNumber>3</PartNumber><ETag>&quot;abc&#x31;&#50;&quot;</ETag></Part></CompleteMultipartUpload>";
    expect(parseCompleteMultipartUpload(body)).toEqual([{ partNumber: 3, etag: "abc12", checksums: {} }]);
  });

  it("refuses what does not fit the schema with MalformedXML", () => {
    const cases: [string, string][] = [
      ["", "the document is not one CompleteMultipartUpload element"],
      ["<CompleteMultipartUpload></CompleteMultipartUpload>", "there are no parts"],
      ["<CompleteMultipartUpload/>", "the document is not one CompleteMultipartUpload element"],
      [
        "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber></Part></CompleteMultipartUpload>",
        "every Part needs a PartNumber and an ETag",
      ],
      [
        "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>a</ETag><Size>5</Size></Part></CompleteMultipartUpload>",
        "a Part has an unknown element <Size>",
      ],
      [
        "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><PartNumber>2</PartNumber><ETag>a</ETag></Part></CompleteMultipartUpload>",
        "a Part has two <PartNumber> elements",
      ],
      [
        "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>a&b</ETag></Part></CompleteMultipartUpload>",
        "<ETag> holds an unknown entity",
      ],
      [
        "<CompleteMultipartUpload><Part><PartNumber>1<ETag>a</ETag></PartNumber></Part></CompleteMultipartUpload>",
        'unexpected content in a Part: "<PartNumber>1<ETag>a</ETag></PartNumber>"',
      ],
      [
        "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>a</ETag></Part>junk</CompleteMultipartUpload>",
        'unexpected content "junk"',
      ],
      [
        "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>a</ETag></Part></CompleteMultipartUpload><x/>",
        "the document is not one CompleteMultipartUpload element",
      ],
    ];
    for (const [body, why] of cases) {
      expect(parseCompleteMultipartUpload(body), body).toMatchObject({
        code: "MalformedXML",
        status: 400,
        message: `The XML you provided was not well-formed or did not validate against our published schema: ${why}.`,
      });
    }
  });

  it("refuses part numbers out of 1..10000 and out of ascending order", () => {
    const parts = (...numbers: string[]) =>
      `<CompleteMultipartUpload>${numbers.map((n) => `<Part><PartNumber>${n}</PartNumber><ETag>e${n}</ETag></Part>`).join("")}</CompleteMultipartUpload>`;
    expect(parseCompleteMultipartUpload(parts("0"))).toMatchObject({
      code: "InvalidArgument",
      message: 'Part number must be an integer between 1 and 10000, inclusive (got "0").',
    });
    expect(parseCompleteMultipartUpload(parts("10001"))).toMatchObject({ code: "InvalidArgument" });
    expect(parseCompleteMultipartUpload(parts("1.5"))).toMatchObject({ code: "InvalidArgument" });
    expect(parseCompleteMultipartUpload(parts("1", "3", "2"))).toMatchObject({
      code: "InvalidPartOrder",
      message: "The list of parts was not in ascending order. The parts list must be specified in order by part number.",
    });
    expect(parseCompleteMultipartUpload(parts("2", "2"))).toMatchObject({ code: "InvalidPartOrder" });
    expect(parseCompleteMultipartUpload(parts("1", "10000"))).toEqual([
      { partNumber: 1, etag: "e1", checksums: {} },
      { partNumber: 10000, etag: "e10000", checksums: {} },
    ]);
  });

  it("parses 10,000 parts and refuses a body over the cap", () => {
    const numbers = Array.from({ length: 10_000 }, (_, i) => i + 1);
    const body = `<CompleteMultipartUpload>${numbers.map((n) => `<Part><PartNumber>${n}</PartNumber><ETag>"${n.toString(16).padStart(32, "0")}"</ETag><ChecksumSHA256>${"A".repeat(43)}=</ChecksumSHA256></Part>\n`).join("")}</CompleteMultipartUpload>`;
    const parsed = parseCompleteMultipartUpload(body);
    expect(Array.isArray(parsed) && [parsed.length, parsed[9_999]]).toEqual([
      10_000,
      { partNumber: 10_000, etag: "00000000000000000000000000002710", checksums: { ChecksumSHA256: `${"A".repeat(43)}=` } },
    ]);
    expect(parseCompleteMultipartUpload(" ".repeat(MAX_COMPLETE_MULTIPART_BYTES + 1))).toMatchObject({ code: "MaxMessageLengthExceeded" });
  });

  it("reads a body up to the cap and refuses one past it without reading on", async () => {
    expect(await readLimitedText(new Response("<a>€</a>").body, 10)).toBe("<a>€</a>");
    expect(await readLimitedText(null, 10)).toBe("");
    let pulls = 0;
    const endless = new ReadableStream<Uint8Array>({
      pull(controller) {
        pulls++;
        controller.enqueue(new Uint8Array(1024));
      },
    });
    const result = await readLimitedText(endless, 4096);
    expect(result).toMatchObject({ code: "MaxMessageLengthExceeded", message: "Your request was too big: at most 4096 bytes." });
    expect(pulls).toBeLessThanOrEqual(6);
  });
});
