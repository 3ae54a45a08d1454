// The first admin of a service reachable beyond this machine needs the one-time setup token
// (README "First run"). Every client here is on this machine, so "another machine" is a client
// that the trusted loopback proxy forwards (X-Forwarded-For), as behind a reverse proxy.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN, startTestStack, type TestStack } from "../helpers/stack";

const SETUP_TOKEN = "a-setup-token-for-the-test-0123456789";
const remote = { "x-forwarded-for": "203.0.113.50" };

async function stillNeedsSetup(t: TestStack): Promise<void> {
  expect((await t.call("GET", "/api/cloud/auth/setup/status")).body.needs_setup).toBe(true);
  const login = await t.call("POST", "/api/cloud/auth/login", { json: { username: ADMIN.username, password: ADMIN.password } });
  expect(login.status).toBe(401);
}

describe("first admin in development (SETUP_TOKEN set)", () => {
  let t: TestStack;
  beforeAll(async () => {
    t = await startTestStack(undefined, { SETUP_TOKEN });
  });
  afterAll(() => t?.stop());

  it("refuses a first admin from another machine without the token (403, nothing created)", async () => {
    const reply = await t.call("POST", "/api/cloud/auth/setup/first-admin", { json: ADMIN, headers: remote });
    expect(reply.status).toBe(403);
    expect(reply.body).toEqual({
      code: "setup_token_required",
      detail:
        "Creating the first admin from another machine needs the one-time setup token: send it as setup_token. npm start prints it at start; deployed, it is the SETUP_TOKEN secret",
    });
    expect(reply.headers.get("set-cookie")).toBeNull();
    await stillNeedsSetup(t);
  });

  it("refuses a wrong token, and a forwarded or forged loopback address is no excuse", async () => {
    const wrong = await t.call("POST", "/api/cloud/auth/setup/first-admin", { json: { ...ADMIN, setup_token: "guess" }, headers: remote });
    expect([wrong.status, wrong.body.code]).toEqual([403, "invalid_setup_token"]);
    const almost = await t.call("POST", "/api/cloud/auth/setup/first-admin", {
      json: { ...ADMIN, setup_token: SETUP_TOKEN.slice(0, -1) + "X" },
      headers: remote,
    });
    expect([almost.status, almost.body.code]).toEqual([403, "invalid_setup_token"]);
    const forwardedLoopback = await t.call("POST", "/api/cloud/auth/setup/first-admin", {
      json: ADMIN,
      headers: { "x-forwarded-for": "127.0.0.1" },
    });
    expect([forwardedLoopback.status, forwardedLoopback.body.code]).toEqual([403, "setup_token_required"]);
    const realIp = await t.call("POST", "/api/cloud/auth/setup/first-admin", { json: ADMIN, headers: { "x-real-ip": "::1" } });
    expect([realIp.status, realIp.body.code]).toEqual([403, "setup_token_required"]);
    // A proxy that appends passes on a garbled first entry: still a forwarded client.
    const garbled = await t.call("POST", "/api/cloud/auth/setup/first-admin", {
      json: ADMIN,
      headers: { "x-forwarded-for": "not-an-address, 203.0.113.50" },
    });
    expect([garbled.status, garbled.body.code]).toEqual([403, "setup_token_required"]);
    await stillNeedsSetup(t);
  });

  it("creates the first admin from another machine with the token, once", async () => {
    const created = await t.call("POST", "/api/cloud/auth/setup/first-admin", {
      json: { ...ADMIN, setup_token: SETUP_TOKEN },
      headers: remote,
    });
    expect(created.status).toBe(201);
    expect(created.body.user).toMatchObject({ username: ADMIN.username, levels: ["admin"] });
    expect(created.text).not.toContain(SETUP_TOKEN);
    const again = await t.call("POST", "/api/cloud/auth/setup/first-admin", {
      json: { ...ADMIN, username: "second", email: "second@example.com", setup_token: SETUP_TOKEN },
      headers: remote,
    });
    expect([again.status, again.body.code]).toEqual([409, "conflict"]);
    expect(t.lines.filter((line) => line.includes(SETUP_TOKEN))).toEqual([]);
  });
});

describe("first admin when deployed (SERVICE_ENV production) without SETUP_TOKEN", () => {
  let t: TestStack;
  beforeAll(async () => {
    t = await startTestStack(undefined, { SERVICE_ENV: "production", SETUP_TOKEN: "" });
  });
  afterAll(() => t?.stop());

  it("refuses every first admin, even from loopback, and says to set the secret", async () => {
    for (const json of [ADMIN, { ...ADMIN, setup_token: "anything" }]) {
      const reply = await t.call("POST", "/api/cloud/auth/setup/first-admin", { json });
      expect(reply.status).toBe(403);
      expect(reply.body).toEqual({
        code: "setup_token_unset",
        detail:
          "Creating the first admin needs a setup token, and this service has none: set the SETUP_TOKEN secret (wrangler secret put SETUP_TOKEN; locally the SETUP_TOKEN variable) and send it as setup_token",
      });
    }
    await stillNeedsSetup(t);
  });
});
