// The session cookie over HTTPS is `__Host-st_session` (Secure, Path=/, no Domain), so plain HTTP
// or a sibling subdomain cannot plant one; only that name is read there. The stack here says it
// is reached over HTTPS with SERVICE_PUBLIC_URL, as behind a TLS-terminating proxy.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN, setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";

let t: TestStack;
beforeAll(async () => {
  t = await startTestStack(undefined, { SERVICE_PUBLIC_URL: "https://train.example.com" });
  await setUpAdmin(t);
});
afterAll(async () => {
  await t?.stop();
});

const login = () => t.call("POST", "/api/cloud/auth/login", { json: { username: ADMIN.username, password: ADMIN.password } });
const tokenOf = (setCookie: string) => /^__Host-st_session=([A-Za-z0-9_-]{43});/.exec(setCookie)?.[1];

describe("the session cookie over HTTPS", () => {
  it("is __Host-st_session: Secure, Path=/, HttpOnly, SameSite=Lax, no Domain", async () => {
    const reply = await login();
    expect(reply.status).toBe(200);
    const setCookie = reply.headers.get("set-cookie")!;
    expect(tokenOf(setCookie)).toBeDefined();
    const attributes = setCookie
      .split(";")
      .slice(1)
      .map((part) => part.trim().split("=")[0]!.toLowerCase());
    expect(attributes).toEqual(expect.arrayContaining(["path", "httponly", "secure", "samesite", "expires"]));
    expect(attributes).not.toContain("domain");
    expect(setCookie).toContain("Path=/;");
  });

  it("is read only under its __Host- name: a plain st_session with a valid token is refused", async () => {
    const token = tokenOf((await login()).headers.get("set-cookie")!)!;
    const prefixed = await t.call("GET", "/api/users/me", { auth: { cookie: `__Host-st_session=${token}` } });
    expect([prefixed.status, prefixed.body.auth_method]).toEqual([200, "session"]);
    const plain = await t.call("GET", "/api/users/me", { auth: { cookie: `st_session=${token}` } });
    expect([plain.status, plain.body.code]).toEqual([401, "unauthenticated"]);
  });

  it("is cleared under the same name at logout", async () => {
    const cookie = `__Host-st_session=${tokenOf((await login()).headers.get("set-cookie")!)!}`;
    const out = await t.call("POST", "/api/cloud/auth/logout", { auth: { cookie } });
    expect(out.status).toBe(200);
    expect(out.headers.get("set-cookie")).toMatch(/^__Host-st_session=; Max-Age=0; Path=\/; HttpOnly; Secure; SameSite=Lax$/);
    expect((await t.call("GET", "/api/users/me", { auth: { cookie } })).status).toBe(401);
  });
});
