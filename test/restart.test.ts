import { describe, expect, it } from "vitest";
import { createUserWithKey, sessionCookie, setUpAdmin, startTestStack, tempDataDir } from "./helpers/stack";

describe("a restart on the same data directory", () => {
  it("keeps users, sessions, API keys (and their revocation) and settings", async () => {
    const dataDir = tempDataDir();
    const first = await startTestStack(dataDir);
    const admin = await setUpAdmin(first);
    const researcher = await createUserWithKey(first, { key: admin.key }, "researcher", "rita");
    const revoked = (await first.call("POST", "/api/cloud/auth/api-keys", { json: { name: "old" }, auth: { cookie: admin.cookie } })).body;
    await first.call("DELETE", `/api/cloud/auth/api-keys/${revoked.id}`, { auth: { key: admin.key } });
    await first.call("PUT", "/api/cloud/auth/registration", { json: { enabled: true }, auth: { key: admin.key } });
    await first.stop({ keepData: true });

    const second = await startTestStack(dataDir);
    try {
      expect((await second.call("GET", "/api/cloud/auth/setup/status")).body).toEqual({ needs_setup: false, registration_enabled: true });
      expect((await second.call("GET", "/api/users/me", { auth: { key: admin.key } })).body.username).toBe("admin");
      expect((await second.call("GET", "/api/users/me", { auth: { cookie: admin.cookie } })).body.auth_method).toBe("session");
      expect((await second.call("GET", "/api/users/me", { auth: { key: researcher.key } })).body).toMatchObject({ username: "rita", level: "researcher" });
      expect((await second.call("GET", "/api/users/me", { auth: { key: revoked.key } })).status).toBe(401);
      const login = await second.call("POST", "/api/cloud/auth/login", { json: { username: "rita", password: "rita-password" } });
      expect(login.status).toBe(200);
      expect(sessionCookie(login)).toMatch(/^st_session=/);
      expect((await second.call("POST", "/api/cloud/auth/setup/first-admin", { json: { email: "x@example.com", username: "intruder", password: "intruder-pw" } })).status).toBe(409);
    } finally {
      await second.stop();
    }
  });
});
