import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LEVELS, levelAtLeast, type Level } from "../../shared/levels";
import { ROUTE_ACCESS } from "../../shared/permissions";
import { createUserWithKey, setUpAdmin, startTestStack, type Credentials, type TestStack } from "../helpers/stack";

let t: TestStack;
const keys = {} as Record<Level, { key: string; cookie: string }>;

// A concrete path for each route pattern; bodies are left empty, so allowed calls stop at
// validation (4xx other than 401/403) and change nothing.
const concretePath = (pattern: string) =>
  pattern
    .replace("{key_id}", "999999")
    .replace("{file}", "swagger-ui.css")
    .replace("{job_id}", "no-such-job")
    .replace("{name}", "no-such-env")
    .replace("{id}", "999999")
    .replace("/*", "/no-such-job/file.txt");
const routes = Object.entries(ROUTE_ACCESS).map(([route, access]) => {
  const [method, pattern] = route.split(" ") as [string, string];
  // The event stream waits for the caller's next job: a short wait keeps an allowed call brief.
  const query = pattern === "/api/training/events/stream" ? "?wait_seconds=1" : "";
  return { method, path: concretePath(pattern) + query, access };
});

beforeAll(async () => {
  t = await startTestStack();
  const admin = await setUpAdmin(t);
  keys.admin = admin;
  for (const level of LEVELS.filter((l) => l !== "admin")) keys[level] = await createUserWithKey(t, { cookie: admin.cookie }, level);
});
afterAll(async () => {
  await t?.stop();
});

describe("the level/permission table (shared/permissions.ts)", () => {
  it.each(routes.filter((r) => r.access !== "public" && r.access !== "storage"))(
    "$method $path needs a credential",
    async ({ method, path }) => {
      const reply = await t.call(method, path, { json: method === "GET" || method === "DELETE" ? undefined : {} });
      expect(reply.status).toBe(401);
      expect(reply.body.code).toBe("unauthenticated");
    },
  );

  it.each(routes.filter((r) => r.access === "public"))("$method $path is public", async ({ method, path }) => {
    const reply = await t.call(method, path, { json: method === "GET" ? undefined : {} });
    expect([401, 403]).not.toContain(reply.status);
    // Allowed is answered: a bad (empty) body is a 4xx that says so, never a 5xx.
    expect(reply.status, reply.text).toBeLessThan(500);
  });

  it.each(routes.filter((r) => r.access === "worker"))(
    "$method $path refuses every user credential (worker token only)",
    async ({ method, path }) => {
      for (const level of LEVELS) {
        const reply = await t.call(method, path, { json: method === "GET" ? undefined : {}, auth: { bearer: keys[level].key } });
        expect(reply.status).toBe(401);
        expect(reply.body.code).toBe("invalid_worker_token");
      }
    },
  );

  const cases = routes.flatMap((route) =>
    route.access === "public" || route.access === "worker" || route.access === "storage"
      ? []
      : LEVELS.map((level) => ({ ...route, level, allowed: levelAtLeast(level, (route.access as { level: Level }).level) })),
  );
  it.each(cases)("$method $path as $level: allowed=$allowed", async ({ method, path, level, allowed, access }) => {
    const sessionOnly = typeof access === "object" && access.session === true;
    const auth: Credentials = sessionOnly ? { cookie: keys[level].cookie } : { key: keys[level].key };
    // Logging out would end the session other cases use; with a key it ends nothing.
    const reply = await t.call(method, path, {
      json: method === "GET" || method === "DELETE" ? undefined : method === "POST" && path.endsWith("/logout") ? undefined : {},
      auth,
      // A live stream (the queue's changes) never ends: its status is the answer.
      streamHeadersOnly: true,
    });
    if (allowed) {
      expect([401, 403], `${reply.status} ${reply.text}`).not.toContain(reply.status);
      expect(reply.status, `${reply.status} ${reply.text}`).toBeLessThan(500);
      if (reply.headers.get("content-type")?.startsWith("text/event-stream")) expect(reply.status).toBe(200);
    } else {
      expect(reply.status).toBe(403);
      expect(reply.body.code).toBe("forbidden");
    }
  });

  it.each(routes.filter((r) => r.access === "storage"))(
    "$method $path (storage endpoint) checks its own credentials: an anonymous read is refused in S3's XML",
    async ({ path }) => {
      const reply = await t.call("GET", path);
      expect(reply.status).toBe(403);
      expect(reply.text).toContain("<Code>AccessDenied</Code>");
    },
  );

  it("lets a viewer read who they are but not create users", async () => {
    const me = await t.call("GET", "/api/users/me", { auth: { key: keys.viewer.key } });
    expect(me.body).toMatchObject({ level: "viewer", priority: 0 });
    const create = await t.call("POST", "/api/users", {
      json: { email: "x@example.com", username: "xavier", password: "xavier-password" },
      auth: { key: keys.viewer.key },
    });
    expect(create.status).toBe(403);
    expect(create.body.detail).toBe("This needs the admin level or higher; you are viewer");
    const users = await t.call("GET", "/api/users", { auth: { key: keys.admin.key } });
    expect(users.body.users.map((u: { username: string }) => u.username)).not.toContain("xavier");
  });
});

describe("the level/permission table users read", () => {
  // It is generated into the API document from shared/permissions.ts (test/api/openapi.test.ts), so no copy may drift.
  it("is not kept a second time in the README", async () => {
    const { readFileSync } = await import("node:fs");
    const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8");
    expect([...readme.matchAll(/^\| `(GET|POST|PUT|DELETE|ALL) \/[^`]*` \|/gm)].map((m) => m[0])).toEqual([]);
  });
});
