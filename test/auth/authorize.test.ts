import { describe, expect, it } from "vitest";
import { createLogger } from "../../edge/log";
import { authorize } from "../../edge/middleware/authorize";
import { createRouter, handleError } from "../../edge/router";
import { accessFor, ROUTE_ACCESS } from "../../shared/permissions";

// The middleware on a tiny app of its own: the real app serves no undeclared route (the route
// inventory in test/api/openapi.test.ts makes sure), so a refusal can only be shown on one made up here.
function appWithUndeclaredRoutes() {
  const lines: string[] = [];
  const handled: string[] = [];
  const app = createRouter();
  app.use("*", async (c, next) => {
    c.set(
      "log",
      createLogger("test", { logLevel: "DEBUG", logFormat: "json" }, null, (line) => lines.push(line)),
    );
    await next();
  });
  app.use("*", authorize());
  app.get("/api/undeclared", (c) => {
    handled.push("get");
    return c.json({ ran: true });
  });
  app.all("/api/undeclared-all/*", (c) => {
    handled.push("all");
    return c.json({ ran: true });
  });
  app.onError(handleError);
  return { app, lines, handled };
}

describe("authorisation fails closed", () => {
  it("refuses a GET route the access table does not name, without running it, and logs an error", async () => {
    const { app, lines, handled } = appWithUndeclaredRoutes();
    const reply = await app.request("/api/undeclared");
    expect(reply.status).toBe(500);
    expect(await reply.json()).toEqual({
      code: "route_access_undeclared",
      detail: "GET /api/undeclared declares no access in shared/permissions.ts, so it is refused",
    });
    expect(handled).toEqual([]);
    expect(lines.some((line) => line.includes('"ERROR"') && line.includes("GET /api/undeclared"))).toBe(true);
  });

  it("refuses an undeclared .all() route too, whatever the method", async () => {
    const { app, handled } = appWithUndeclaredRoutes();
    for (const method of ["GET", "PUT", "DELETE", "POST"]) {
      const reply = await app.request("/api/undeclared-all/x", { method });
      expect(reply.status, method).toBe(500);
      expect(((await reply.json()) as { code: string }).code).toBe("route_access_undeclared");
    }
    expect(handled).toEqual([]);
  });

  it("answers an unknown path 404, not a refusal", async () => {
    const { app } = appWithUndeclaredRoutes();
    expect((await app.request("/api/nothing-here")).status).toBe(404);
  });

  it("names no default: a route missing from the table has no access rule", () => {
    expect(accessFor("GET", "/api/undeclared")).toBeUndefined();
    expect(accessFor("GET", "constructor")).toBeUndefined();
    expect(accessFor("get", "/api/queue")).toEqual({ level: "viewer" });
    expect(ROUTE_ACCESS["ALL /api/cloud/storage/*"]).toBe("storage");
  });
});
