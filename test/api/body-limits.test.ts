// Request bodies are capped per route over real HTTP (issue 12): 1 MiB for JSON unless the route
// says otherwise, counted as the bytes stream, so a chunked body without Content-Length is cut
// off too; 413 payload_too_large naming the cap, and nothing stored.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bodyLimitFor, DEFAULT_BODY_LIMIT_BYTES } from "../../edge/middleware/body-limit";
import { setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";

let t: TestStack;
let admin: { key: string; cookie: string };

/** A body sent in pieces with no Content-Length (chunked transfer encoding). */
function chunked(text: string): ReadableStream<Uint8Array> {
  const bytes = new TextEncoder().encode(text);
  let at = 0;
  return new ReadableStream({
    pull(controller) {
      if (at >= bytes.length) return controller.close();
      controller.enqueue(bytes.subarray(at, at + 64 * 1024));
      at += 64 * 1024;
    },
  });
}
const environmentNames = async () =>
  ((await t.call("GET", "/api/configs/", { auth: { key: admin.key } })).body.environments as { name: string }[]).map((e) => e.name);

beforeAll(async () => {
  t = await startTestStack();
  admin = await setUpAdmin(t);
});
afterAll(async () => {
  await t?.stop();
});

describe("request body limits", () => {
  const huge = JSON.stringify({ name: "huge", description: "x".repeat(DEFAULT_BODY_LIMIT_BYTES + 10) });

  it("refuses a JSON body over 1 MiB sent with Content-Length (413), creating nothing", async () => {
    const refused = await t.call("POST", "/api/configs/environments", {
      body: huge,
      headers: { "content-type": "application/json" },
      auth: { key: admin.key },
    });
    expect(refused.status).toBe(413);
    expect(refused.body).toEqual({
      code: "payload_too_large",
      detail: `The request body is larger than ${DEFAULT_BODY_LIMIT_BYTES} bytes, the most this route accepts`,
    });
    expect(await environmentNames()).not.toContain("huge");
  });

  it("cuts off a chunked body without Content-Length as it streams past the cap (413), creating nothing", async () => {
    const response = await fetch(`${t.base}/api/configs/environments`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": admin.key },
      body: chunked(huge),
      duplex: "half",
    } as RequestInit);
    expect(response.status).toBe(413);
    expect((await response.json()).code).toBe("payload_too_large");
    expect(await environmentNames()).not.toContain("huge");
  });

  it("accepts a body under the cap, chunked or not", async () => {
    // JSON may be padded with whitespace: 500 kB that still fits the route's cap.
    const small = `{"name": "small",${" ".repeat(500_000)}"description": "under the cap"}`;
    const response = await fetch(`${t.base}/api/configs/environments`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": admin.key },
      body: chunked(small),
      duplex: "half",
    } as RequestInit);
    expect(response.status).toBe(201);
    expect(await environmentNames()).toContain("small");
  });

  it("gives uploads, runner event batches and provider webhooks their own caps, and leaves S3 requests to the storage endpoint (pure)", () => {
    expect(bodyLimitFor("/api/configs/environments")).toBe(1024 * 1024);
    expect(bodyLimitFor("/api/datasets/upload")).toBe(100 * 1024 * 1024);
    expect(bodyLimitFor("/api/datasets/upload/zip")).toBe(100 * 1024 * 1024);
    expect(bodyLimitFor("/api/workers/jobs/abc/events")).toBe(200 * 512 * 1024);
    expect(bodyLimitFor("/api/workers/register")).toBe(1024 * 1024);
    // A provider's webhook is its whole training, cumulative logs included.
    expect(bodyLimitFor("/api/webhooks/replicate")).toBe(16 * 1024 * 1024);
    expect(bodyLimitFor("/api/cloud/storage/job/key")).toBeNull();
  });
});

describe("a body refused before it was read", () => {
  // workerd closes a connection whose request body it did not read, resetting it when bytes are
  // left, and the reset took the answer with it: a client saw 502 (npm start's front) or a reset
  // instead of its 401. The Worker now reads such a body, up to 8 MiB, before answering.
  const body = Buffer.alloc(3 * 1024 * 1024, "x");
  const datasets = async () => JSON.stringify((await t.call("GET", "/api/datasets", { auth: { key: admin.key } })).body);

  it("answers a 3 MiB upload without credentials, or with a forged key, with its 401, storing nothing", async () => {
    const before = await datasets();
    const cases: [Record<string, string>, string][] = [
      [{}, "unauthenticated"],
      [{ "x-api-key": "sk_forged_0123456789abcdef0123456789abcdef" }, "invalid_api_key"],
    ];
    for (const [headers, code] of cases) {
      const refused = await fetch(`${t.base}/api/datasets/upload`, { method: "POST", headers, body });
      expect([refused.status, ((await refused.json()) as { code: string }).code]).toEqual([401, code]);
    }
    expect(await datasets()).toBe(before);
  });

  it("answers a 900 KiB POST (under the 1 MiB cap) to a path that does not exist with its 404, and the next request", async () => {
    const under = Buffer.alloc(900 * 1024, "x");
    const answers = await Promise.all(
      Array.from({ length: 4 }, () =>
        fetch(`${t.base}/api/no-such-route`, { method: "POST", headers: { "x-api-key": admin.key }, body: under }),
      ),
    );
    expect(answers.map((answer) => answer.status)).toEqual([404, 404, 404, 404]);
    const next = await t.call("GET", "/api/users/me", { auth: { key: admin.key } });
    expect(next.status).toBe(200);
  });

  it("answers an unsigned 3 MiB PUT to the storage endpoint with S3's 403, storing nothing", async () => {
    const refused = await fetch(`${t.base}/api/cloud/storage/outputs/job-x/model.bin`, { method: "PUT", body });
    expect(refused.status).toBe(403);
    expect(await refused.text()).toMatch(/<Code>AccessDenied<\/Code>/);
  });
});
