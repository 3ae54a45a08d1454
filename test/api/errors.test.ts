import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";

let t: TestStack;
let admin: { cookie: string; key: string };
beforeAll(async () => {
  t = await startTestStack();
  admin = await setUpAdmin(t);
});
afterAll(async () => {
  await t?.stop();
});

const user = { email: "val@example.com", username: "valerie", password: "valerie-password" };

describe("bad input", () => {
  it("answers malformed JSON with 400 and changes nothing", async () => {
    const reply = await t.call("POST", "/api/users", {
      body: '{"email": "val@example.com", ',
      headers: { "content-type": "application/json" },
      auth: { key: admin.key },
    });
    expect(reply.status).toBe(400);
    expect(reply.body).toEqual({ detail: "Malformed JSON in request body", code: "bad_request" });
  });

  it("names each field of the wrong type", async () => {
    const reply = await t.call("POST", "/api/users", { json: { ...user, username: 42, level_names: "admin" }, auth: { key: admin.key } });
    expect(reply.status).toBe(422);
    expect(reply.body.code).toBe("invalid_request");
    expect(reply.body.errors.map((e: { path: string }) => e.path).sort()).toEqual(["body.level_names", "body.username"]);
    expect(reply.body.detail).toMatch(/^Invalid request body: /);
  });

  it("refuses unknown fields instead of ignoring them", async () => {
    const reply = await t.call("POST", "/api/users", { json: { ...user, is_admin: true }, auth: { key: admin.key } });
    expect(reply.status).toBe(422);
    expect(reply.body.errors).toEqual([{ path: "body", message: "unknown field(s): is_admin" }]);
  });

  it("refuses an unknown level name", async () => {
    const reply = await t.call("POST", "/api/users", { json: { ...user, level_names: ["superuser"] }, auth: { key: admin.key } });
    expect(reply.status).toBe(422);
    expect(reply.body.errors[0].path).toBe("body.level_names.0");
  });

  it("refuses a body that is not JSON", async () => {
    const reply = await t.call("POST", "/api/cloud/auth/login", {
      body: "username=a&password=b",
      headers: { "content-type": "application/x-www-form-urlencoded" },
    });
    expect(reply.status).toBeGreaterThanOrEqual(400);
    expect(reply.status).toBeLessThan(500);
  });

  it("refuses a non-numeric key id in the path with 422", async () => {
    const reply = await t.call("DELETE", "/api/cloud/auth/api-keys/abc", { auth: { key: admin.key } });
    expect(reply.status).toBe(422);
    expect(reply.body.errors[0].path).toBe("param.key_id");
  });

  it("stored none of the invalid users", async () => {
    const users = await t.call("GET", "/api/users", { auth: { key: admin.key } });
    expect(users.body.users.map((u: { username: string }) => u.username)).toEqual(["admin"]);
  });

  it("answers an unknown route with a JSON 404", async () => {
    const reply = await t.call("GET", "/api/does-not-exist");
    expect(reply.status).toBe(404);
    expect(reply.body).toEqual({ detail: "No route for GET /api/does-not-exist", code: "not_found" });
  });
});

describe("correlation ids and logs", () => {
  it("echoes a caller's X-Request-ID and stamps the log lines with it", async () => {
    const reply = await t.call("GET", "/api/users/me", { auth: { key: admin.key }, headers: { "x-request-id": "trace-abc.123" } });
    expect(reply.headers.get("x-request-id")).toBe("trace-abc.123");
    await expect.poll(() => t.lines.some((l) => l.includes('"correlation_id":"trace-abc.123"'))).toBe(true);
    const line = JSON.parse(t.lines.find((l) => l.includes('"correlation_id":"trace-abc.123"'))!);
    expect(Object.keys(line).sort()).toEqual(["correlation_id", "extra", "level", "logger", "message", "source", "timestamp"]);
    expect(line).toMatchObject({ level: "INFO", message: "GET /api/users/me 200" });
    expect(line.source).toHaveProperty("file");
    expect(line.source).toHaveProperty("line");
    expect(line.source).toHaveProperty("function");
  });

  it("generates an id when none (or a malformed one) is sent", async () => {
    const none = await t.call("GET", "/api/cloud/health/live");
    expect(none.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    const bad = await t.call("GET", "/api/cloud/health/live", { headers: { "x-request-id": "bad id with spaces" } });
    expect(bad.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("never logs passwords, API keys or session tokens", async () => {
    const password = "very-secret-password-1";
    await t.call("POST", "/api/users", { json: { email: "sec@example.com", username: "secretive", password }, auth: { key: admin.key } });
    const login = await t.call("POST", "/api/cloud/auth/login", { json: { username: "secretive", password } });
    await t.call("POST", "/api/cloud/auth/login", { json: { username: "secretive", password: "wrong-" + password } });
    const token = /st_session=([^;]+)/.exec(login.headers.get("set-cookie")!)![1]!;
    const key = (await t.call("POST", "/api/cloud/auth/api-keys", { json: { name: "log check" }, auth: { cookie: `st_session=${token}` } }))
      .body.key as string;
    await t.call("GET", "/api/users/me", { auth: { bearer: key } });
    await t.call("GET", "/api/users/me", { auth: { key: key + "x" } });
    await expect.poll(() => t.lines.filter((l) => l.includes("/api/users/me 401")).length).toBeGreaterThan(0);
    const all = t.lines.join("\n");
    expect(all).toContain("login failed");
    for (const secret of [password, token, key, key.slice(3)]) expect(all).not.toContain(secret);
  });
});

describe("log file", () => {
  it("is not written unless SERVICE_LOG_FILE is set", () => {
    expect(() => readFileSync(`${t.dataDir}/service.log`)).toThrow();
  });
});
