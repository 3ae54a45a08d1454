import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { usernameDigest } from "../../edge/middleware/failure-limits";
import { createUserWithKey, sessionCookie, startTestStack, type TestStack } from "../helpers/stack";

let t: TestStack;
/** Whichever racer won the setup race below. */
let admin: { email: string; username: string; password: string };
beforeAll(async () => {
  t = await startTestStack();
});
afterAll(async () => {
  await t?.stop();
});

describe("first admin", () => {
  it("reports that setup is needed on a new service", async () => {
    const status = await t.call("GET", "/api/cloud/auth/setup/status");
    expect(status.status).toBe(200);
    expect(status.body).toEqual({ needs_setup: true, registration_enabled: false });
  });

  it("creates exactly one admin when ten requests race", async () => {
    const racers = Array.from({ length: 10 }, (_, i) => ({
      email: `racer${i}@example.com`,
      username: `racer${i}`,
      password: `racer-password-${i}`,
    }));
    const attempts = await Promise.all(racers.map((json) => t.call("POST", "/api/cloud/auth/setup/first-admin", { json })));
    const statuses = attempts.map((a) => a.status).sort();
    expect(statuses).toEqual([201, 409, 409, 409, 409, 409, 409, 409, 409, 409]);
    const winner = attempts.find((a) => a.status === 201)!;
    admin = racers[attempts.indexOf(winner)]!;
    expect(winner.body.user.levels).toEqual(["admin"]);
    expect(attempts.find((a) => a.status === 409)!.body.code).toBe("conflict");

    const cookie = sessionCookie(winner);
    const users = await t.call("GET", "/api/users", { auth: { cookie } });
    expect(users.body.users).toHaveLength(1);
    expect(users.body.users[0].levels).toEqual(["admin"]);
    expect((await t.call("GET", "/api/cloud/auth/setup/status")).body.needs_setup).toBe(false);
  });
});

describe("sessions", () => {
  it("logs in with a session cookie that is HttpOnly, SameSite=Lax and lasts 24 hours", async () => {
    const { username, password } = admin;
    const before = Date.now();
    const login = await t.call("POST", "/api/cloud/auth/login", { json: { username, password } });
    expect(login.status).toBe(200);
    const setCookie = login.headers.get("set-cookie")!;
    expect(setCookie).toMatch(/^st_session=[A-Za-z0-9_-]{43};/);
    expect(setCookie).toContain("HttpOnly");
    expect(setCookie).toContain("SameSite=Lax");
    expect(setCookie).toContain("Path=/");
    expect(setCookie).not.toContain("Secure"); // plain HTTP on loopback
    const expires = Date.parse(login.body.expires_at);
    expect(expires - before).toBeGreaterThan(24 * 3600_000 - 60_000);
    expect(expires - before).toBeLessThanOrEqual(24 * 3600_000 + 60_000);

    const me = await t.call("GET", "/api/users/me", { auth: { cookie: sessionCookie(login) } });
    expect(me.status).toBe(200);
    expect(me.body).toMatchObject({ username, level: "admin", priority: 30, auth_method: "session" });
    // Over plain HTTP only st_session is read; the HTTPS name carries nothing here.
    const prefixed = await t.call("GET", "/api/users/me", { auth: { cookie: `__Host-${sessionCookie(login)}` } });
    expect(prefixed.status).toBe(401);
  });

  it("gives a 30-day session with remember_me", async () => {
    const { username, password } = admin;
    const login = await t.call("POST", "/api/cloud/auth/login", { json: { username, password, remember_me: true } });
    expect(Date.parse(login.body.expires_at) - Date.now()).toBeGreaterThan(29 * 86400_000);
  });

  it("accepts the email in place of the username", async () => {
    const { email, password } = admin;
    expect((await t.call("POST", "/api/cloud/auth/login", { json: { username: email, password } })).status).toBe(200);
  });

  it("refuses a wrong password and an unknown user alike", async () => {
    const { username } = admin;
    const wrong = await t.call("POST", "/api/cloud/auth/login", { json: { username, password: "not-the-password" } });
    const unknown = await t.call("POST", "/api/cloud/auth/login", { json: { username: "nobody", password: "whatever-it-is" } });
    for (const reply of [wrong, unknown]) {
      expect(reply.status).toBe(401);
      expect(reply.body).toEqual({ detail: "Wrong username or password", code: "invalid_credentials" });
      expect(reply.headers.get("set-cookie")).toBeNull();
    }
  });

  it("logs out: the cookie is cleared and no longer works", async () => {
    const { username, password } = admin;
    const cookie = sessionCookie(await t.call("POST", "/api/cloud/auth/login", { json: { username, password } }));
    const out = await t.call("POST", "/api/cloud/auth/logout", { auth: { cookie } });
    expect(out.status).toBe(200);
    expect(out.headers.get("set-cookie")).toMatch(/st_session=;.*Max-Age=0/);
    expect((await t.call("GET", "/api/users/me", { auth: { cookie } })).status).toBe(401);
  });

  it("refuses a forged session cookie", async () => {
    const reply = await t.call("GET", "/api/users/me", { auth: { cookie: "st_session=forged-token-value" } });
    expect(reply.status).toBe(401);
    expect(reply.body.code).toBe("unauthenticated");
  });
});

describe("API keys", () => {
  it("are shown once, prefixed st_, and work as X-API-Key and as Authorization: Bearer", async () => {
    const cookie = await adminCookie();
    const created = await t.call("POST", "/api/cloud/auth/api-keys", { json: { name: "laptop" }, auth: { cookie } });
    expect(created.status).toBe(201);
    expect(created.body.key).toMatch(/^st_[A-Za-z0-9_-]{43}$/);
    expect(created.body.prefix).toBe(created.body.key.slice(0, 11));
    expect(created.body).toMatchObject({ name: "laptop", expires_at: null, last_used_at: null, revoked_at: null });

    const viaHeader = await t.call("GET", "/api/users/me", { auth: { key: created.body.key } });
    const viaBearer = await t.call("GET", "/api/users/me", { auth: { bearer: created.body.key } });
    for (const reply of [viaHeader, viaBearer]) {
      expect(reply.status).toBe(200);
      expect(reply.body.auth_method).toBe("api_key");
      expect(reply.body.level).toBe("admin");
    }

    const listed = await t.call("GET", "/api/cloud/auth/api-keys", { auth: { cookie } });
    const entry = listed.body.keys.find((k: { id: number }) => k.id === created.body.id);
    expect(entry.prefix).toBe(created.body.prefix);
    expect(entry).not.toHaveProperty("key");
    expect(listed.text).not.toContain(created.body.key);
    // last_used_at is recorded after the response, so give it a moment.
    await expect
      .poll(
        async () =>
          (await t.call("GET", "/api/cloud/auth/api-keys", { auth: { cookie } })).body.keys.find(
            (k: { id: number }) => k.id === created.body.id,
          ).last_used_at,
      )
      .not.toBeNull();
  });

  it("refuses wrong, malformed and revoked keys with 401", async () => {
    const cookie = await adminCookie();
    const created = (await t.call("POST", "/api/cloud/auth/api-keys", { json: { name: "to revoke" }, auth: { cookie } })).body;
    const tampered = created.key.slice(0, -1) + (created.key.endsWith("A") ? "B" : "A");
    for (const key of [tampered, "st_short", "not-a-key", created.key.slice(0, 11) + "x".repeat(32)]) {
      const reply = await t.call("GET", "/api/users/me", { auth: { key } });
      expect(reply.status, key).toBe(401);
      expect(reply.body.code).toBe("invalid_api_key");
      expect(reply.headers.get("www-authenticate")).toBe("Bearer");
    }

    // Used first, so the service has just verified it: revocation must still take effect at once.
    expect((await t.call("GET", "/api/users/me", { auth: { key: created.key } })).status).toBe(200);
    // While it is remembered (by the key itself), a key sharing its prefix is still refused.
    for (const key of [tampered, created.key.slice(0, 11) + "x".repeat(32)]) {
      const reply = await t.call("GET", "/api/users/me", { auth: { key } });
      expect([reply.status, reply.body.code], key).toEqual([401, "invalid_api_key"]);
    }
    const revoked = await t.call("DELETE", `/api/cloud/auth/api-keys/${created.id}`, { auth: { cookie } });
    expect(revoked.status).toBe(200);
    expect(revoked.body.revoked_at).not.toBeNull();
    for (const auth of [{ key: created.key }, { bearer: created.key }]) {
      expect((await t.call("GET", "/api/users/me", { auth })).status).toBe(401);
    }
  });

  it("cannot be created with an API key: minting credentials needs a session", async () => {
    const cookie = await adminCookie();
    const key = (await t.call("POST", "/api/cloud/auth/api-keys", { json: { name: "k" }, auth: { cookie } })).body.key;
    const reply = await t.call("POST", "/api/cloud/auth/api-keys", { json: { name: "k2" }, auth: { key } });
    expect(reply.status).toBe(403);
    expect(reply.body.code).toBe("session_required");
  });

  it("can only be revoked by their owner or an admin", async () => {
    const adminAuth = { cookie: await adminCookie() };
    const alice = await createUserWithKey(t, adminAuth, "researcher", "alice");
    const bob = await createUserWithKey(t, adminAuth, "researcher", "bob");
    const aliceKeys = (await t.call("GET", "/api/cloud/auth/api-keys", { auth: { key: alice.key } })).body.keys;
    const byBob = await t.call("DELETE", `/api/cloud/auth/api-keys/${aliceKeys[0].id}`, { auth: { key: bob.key } });
    expect(byBob.status).toBe(404);
    expect((await t.call("GET", "/api/users/me", { auth: { key: alice.key } })).status).toBe(200);
    const byAdmin = await t.call("DELETE", `/api/cloud/auth/api-keys/${aliceKeys[0].id}`, { auth: adminAuth });
    expect(byAdmin.status).toBe(200);
    expect((await t.call("GET", "/api/users/me", { auth: { key: alice.key } })).status).toBe(401);
  });
});

describe("users and registration", () => {
  it("lets an admin create users with levels; duplicates are 409", async () => {
    const auth = { cookie: await adminCookie() };
    const created = await t.call("POST", "/api/users", {
      json: { email: "lee@example.com", username: "lee", password: "lee-password", level_names: ["lead", "researcher"] },
      auth,
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      username: "lee",
      email: "lee@example.com",
      levels: ["lead", "researcher"],
      level: "lead",
      priority: 20,
    });
    expect(created.text).not.toContain("lee-password");
    expect(created.text).not.toContain("pbkdf2");
    const again = await t.call("POST", "/api/users", {
      json: { email: "other@example.com", username: "LEE", password: "lee-password" },
      auth,
    });
    expect(again.status).toBe(409);
  });

  it("defaults a new user to researcher", async () => {
    const auth = { cookie: await adminCookie() };
    const created = await t.call("POST", "/api/users", {
      json: { email: "rae@example.com", username: "rae", password: "rae-password" },
      auth,
    });
    expect(created.body.levels).toEqual(["researcher"]);
  });

  it("keeps public registration off until an admin turns it on", async () => {
    const newcomer = { email: "new@example.com", username: "newcomer", password: "newcomer-password" };
    const refused = await t.call("POST", "/api/cloud/auth/register", { json: newcomer });
    expect(refused.status).toBe(403);
    expect(refused.body.code).toBe("registration_disabled");

    const auth = { cookie: await adminCookie() };
    expect((await t.call("PUT", "/api/cloud/auth/registration", { json: { enabled: true }, auth })).body).toEqual({ enabled: true });
    expect((await t.call("GET", "/api/cloud/auth/setup/status")).body.registration_enabled).toBe(true);
    const registered = await t.call("POST", "/api/cloud/auth/register", { json: newcomer });
    expect(registered.status).toBe(201);
    expect(registered.body.levels).toEqual(["researcher"]);
    expect((await t.call("POST", "/api/cloud/auth/login", { json: { username: "newcomer", password: newcomer.password } })).status).toBe(
      200,
    );

    await t.call("PUT", "/api/cloud/auth/registration", { json: { enabled: false }, auth });
    expect(
      (await t.call("POST", "/api/cloud/auth/register", { json: { ...newcomer, username: "late", email: "late@example.com" } })).status,
    ).toBe(403);
  });
});

describe("cross-site requests", () => {
  it("refuses a state-changing request authenticated by cookie from another origin", async () => {
    const cookie = await adminCookie();
    const evil = await t.call("POST", "/api/cloud/auth/api-keys", {
      json: { name: "evil" },
      auth: { cookie },
      headers: { origin: "https://evil.example" },
    });
    expect(evil.status).toBe(403);
    expect(evil.body.code).toBe("csrf_rejected");
    const fetchSite = await t.call("PUT", "/api/cloud/auth/registration", {
      json: { enabled: true },
      auth: { cookie },
      headers: { "sec-fetch-site": "cross-site" },
    });
    expect(fetchSite.status).toBe(403);
    expect((await t.call("GET", "/api/cloud/auth/setup/status")).body.registration_enabled).toBe(false);

    const sameOrigin = await t.call("POST", "/api/cloud/auth/api-keys", {
      json: { name: "ok" },
      auth: { cookie },
      headers: { origin: t.base },
    });
    expect(sameOrigin.status).toBe(201);
  });

  it("does not apply to API keys, which a browser never sends on its own", async () => {
    const cookie = await adminCookie();
    const key = (await t.call("POST", "/api/cloud/auth/api-keys", { json: { name: "k" }, auth: { cookie } })).body.key;
    const reply = await t.call("PUT", "/api/cloud/auth/registration", {
      json: { enabled: false },
      auth: { key },
      headers: { origin: "https://elsewhere.example" },
    });
    expect(reply.status).toBe(200);
  });
});

describe("failed logins per username and address (10 in 15 minutes from one address)", () => {
  /** A login from `address` behind the trusted loopback proxy, or from this machine itself (not forwarded: exempt from the per-address rule "login" in development, so it can fail 10 times in a row). */
  const login = (username: string, password: string, address: number | "loopback") =>
    t.call("POST", "/api/cloud/auth/login", {
      json: { username, password },
      headers: address === "loopback" ? {} : { "x-forwarded-for": `198.51.100.${address}` },
    });
  const expectLimited = (reply: Awaited<ReturnType<typeof login>>) => {
    expect(reply.status).toBe(429);
    expect(reply.body.code).toBe("rate_limited");
    expect(reply.body.detail).toMatch(
      /^Rate limit exceeded: at most 10 failed logins for one username from one address per 900 s \(rule "login-failures"\); retry in \d+ s$/,
    );
    expect(Number(reply.headers.get("retry-after"))).toBeGreaterThan(800);
    expect(reply.headers.get("set-cookie")).toBeNull();
  };
  const createUser = async (username: string, levels: string[] = ["researcher"]) => {
    const json = { email: `${username}@example.com`, username, password: `${username}-password`, level_names: levels };
    expect((await t.call("POST", "/api/users", { json, auth: { cookie: await adminCookie() } })).status).toBe(201);
  };

  it("lets an admin whom a guesser has locked out at the guesser's address log in from another, the guesser's address staying refused", async () => {
    await createUser("ada", ["admin"]);
    // The attack: 12 wrong passwords for the admin from one address.
    for (let i = 1; i <= 10; i++) expect((await login("ada", `guess-${i}`, "loopback")).status).toBe(401);
    expectLimited(await login("ada", "guess-11", "loopback"));
    expectLimited(await login("ada", "ada-password", "loopback"));
    // The admin, from an address that has not been failing: logged in, with a working session.
    const elsewhere = await login("ada", "ada-password", 7);
    expect(elsewhere.status).toBe(200);
    expect(elsewhere.body.user).toMatchObject({ username: "ada", level: "admin" });
    const me = await t.call("GET", "/api/users/me", { auth: { cookie: sessionCookie(elsewhere) } });
    expect([me.status, me.body.username]).toEqual([200, "ada"]);
    // That success forgave nothing at the guesser's address.
    expectLimited(await login("ada", "ada-password", "loopback"));
  });

  it("locks nobody out for failures spread over many addresses: the right password from another logs in", async () => {
    await createUser("spread");
    for (let i = 1; i <= 12; i++) expect((await login(i % 2 ? "spread" : "SPREAD", `guess-${i}`, 100 + i)).status).toBe(401);
    expect((await login("spread", "spread-password", 120)).status).toBe(200);
  });

  it("refuses the 11th attempt on one name from one address, the right password and any spelling of the name included, and unknown names alike", async () => {
    await createUser("target");
    for (let i = 1; i <= 10; i++) expect((await login(i % 2 ? "target" : "TARGET", `guess-${i}`, "loopback")).status).toBe(401);
    expectLimited(await login("Target", "target-password", "loopback"));
    for (let i = 1; i <= 10; i++) expect((await login("no-such-user", `guess-${i}`, "loopback")).status).toBe(401);
    expectLimited(await login("no-such-user", "guess-11", "loopback"));
    // Another name from the same address is not affected.
    expect((await login("lee", "lee-password", "loopback")).status).toBe(200);
  });

  it("keeps the per-address limit: one address gets 5 login attempts a minute, whatever the names", async () => {
    for (let i = 1; i <= 5; i++) expect((await login(`name-${i}`, "wrong-password", 60)).status).toBe(401);
    const refused = await login("lee", "lee-password", 60);
    expect([refused.status, refused.body.code, refused.headers.get("ratelimit-policy")]).toEqual([429, "rate_limited", '"login";q=5;w=60']);
    expect((await login("lee", "lee-password", 61)).status).toBe(200);
  });

  it("does not count successful logins: a success forgives the failures before it", async () => {
    await createUser("steady");
    for (let round = 0; round < 2; round++) {
      for (let i = 1; i <= 9; i++) expect((await login("steady", `typo-${i}`, "loopback")).status).toBe(401);
      expect((await login("steady", "steady-password", "loopback")).status).toBe(200);
    }
    for (let i = 0; i < 12; i++) expect((await login("steady", "steady-password", "loopback")).status).toBe(200);
  });

  it("logs and audits a failed login without the typed username in clear", async () => {
    const typed = "typed-name-zq7-secret";
    expect((await login(typed, "whatever-1", 90)).status).toBe(401);
    const hash = await usernameDigest(typed);
    await expect.poll(() => t.lines.some((line) => line.includes("login failed") && line.includes(hash))).toBe(true);
    expect(t.lines.filter((line) => line.includes(typed))).toEqual([]);
    const key = (await t.call("POST", "/api/cloud/auth/api-keys", { json: { name: "audit" }, auth: { cookie: await adminCookie() } })).body
      .key;
    await expect
      .poll(async () =>
        (await t.call("GET", "/api/audit?event_type=login_failed&limit=1000", { auth: { key } })).body.entries.find(
          (e: any) => e.details.username_hash === hash,
        ),
      )
      .toBeTruthy();
    const entries = (await t.call("GET", "/api/audit?event_type=login_failed&limit=1000", { auth: { key } })).text;
    expect(entries).not.toContain(typed);
  });
});

async function adminCookie(): Promise<string> {
  return sessionCookie(await t.call("POST", "/api/cloud/auth/login", { json: { username: admin.username, password: admin.password } }));
}
