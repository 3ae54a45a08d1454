import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApp } from "../../edge/app";
import { ServiceClient, ServiceError } from "../../shared/client/client";
import { endpoint } from "../../shared/client/endpoint";
import { endpoints } from "../../shared/client/endpoints";
import { readEventStream } from "../../shared/client/event-stream";
import { QueueStats } from "../../shared/schemas/queue";
import { setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";

/** The ServiceError a call fails with (the test fails if it succeeds). */
const failure = (call: Promise<unknown>): Promise<ServiceError> =>
  call.then(
    () => {
      throw new Error("expected the call to fail");
    },
    (error: unknown) => error as ServiceError,
  );

/** The route definitions the app registers for its OpenAPI document, by `METHOD /path`. */
function registeredRoutes(): Map<string, any> {
  const routes = new Map<string, any>();
  for (const definition of createApp().openAPIRegistry.definitions as any[]) {
    if (definition.type === "route") routes.set(`${definition.route.method.toUpperCase()} ${definition.route.path}`, definition.route);
  }
  return routes;
}

describe("the client's endpoints", () => {
  const routes = registeredRoutes();

  it.each(Object.entries(endpoints))("%s is a route of the app with the route's own schemas", (_name, e) => {
    const route = routes.get(`${e.method} ${e.path}`);
    expect(route, `${e.method} ${e.path} is not a route of the app`).toBeDefined();
    // The same objects, not equal copies: the client speaks exactly what the route validates.
    expect(route.request?.params).toBe("params" in e ? e.params : undefined);
    expect(route.request?.query).toBe("query" in e ? e.query : undefined);
    expect(route.request?.body?.content?.["application/json"]?.schema).toBe("body" in e ? e.body : undefined);
    const success = route.responses?.[200] ?? route.responses?.[201];
    const answer = success?.content?.["application/json"]?.schema;
    if (e.response === "raw") expect(answer).toBeUndefined();
    else expect(answer).toBe(e.response);
  });
});

describe("ServiceClient.url", () => {
  const client = new ServiceClient({ baseUrl: "http://svc.example:8787/" });

  it("fills path parameters encoded and writes the query, leaving out what is undefined", () => {
    const url = client.url(endpoints.queueCancel, { params: { job_id: "a/b c" } });
    expect(url.href).toBe("http://svc.example:8787/api/queue/a%2Fb%20c/cancel");
    const list = client.url(endpoints.queueList, { query: { status: "pending", limit: 5, include_completed: true, cursor: undefined } });
    expect(list.href).toBe("http://svc.example:8787/api/queue?status=pending&limit=5&include_completed=true");
  });

  it("keeps a base path the service is mounted under", () => {
    const mounted = new ServiceClient({ baseUrl: "https://proxy.example/training" });
    expect(mounted.url(endpoints.me, {}).href).toBe("https://proxy.example/training/api/users/me");
  });
});

describe("ServiceClient against the service", () => {
  let t: TestStack;
  let key: string;
  let silent: Server;
  beforeAll(async () => {
    t = await startTestStack();
    ({ key } = await setUpAdmin(t));
    // A server that accepts and never answers, for the timeout.
    silent = createServer(() => {});
    await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
  });
  afterAll(async () => {
    silent?.closeAllConnections();
    silent?.close();
    await t?.stop();
  });

  it("answers with the parsed body", async () => {
    const client = new ServiceClient({ baseUrl: t.base, apiKey: key });
    const me = await client.call(endpoints.me, {});
    expect(me.username).toBe("admin");
    const page = await client.call(endpoints.queueList, { query: { limit: 1 } });
    expect(page).toEqual({ jobs: [], total: 0, next_cursor: null });
  });

  it("throws one ServiceError with the service's status, code and detail", async () => {
    const client = new ServiceClient({ baseUrl: t.base, apiKey: key });
    const missing = await failure(client.call(endpoints.queuePosition, { params: { job_id: "local-nope" } }));
    expect(missing).toBeInstanceOf(ServiceError);
    expect(missing).toMatchObject({ status: 404, code: "not_found" });
    expect(missing.detail).toContain("local-nope");

    const invalid = await failure(client.call(endpoints.queueSubmit, { body: { config_name: "", target: "moon" as never } }));
    expect(invalid).toMatchObject({ status: 422, code: "invalid_request" });
    expect(invalid.fields?.map((f) => f.path).sort()).toEqual(["body.config_name", "body.target"]);

    const anonymous = new ServiceClient({ baseUrl: t.base });
    await expect(anonymous.call(endpoints.me, {})).rejects.toMatchObject({ status: 401, name: "ServiceError" });
  });

  it("sends a worker token as a bearer", async () => {
    const created = await t.call("POST", "/api/admin/workers", { json: { name: "client-box" }, auth: { key } });
    const runner = new ServiceClient({ baseUrl: t.base, bearer: created.body.token });
    const answer = await runner.call(endpoints.workerRegister, { body: { role: "remote", labels: {}, gpus: [], hostname: "h" } });
    expect(answer).toMatchObject({ status: "IDLE", assignments: [], commands: [] });
    // A user's key is not a worker token.
    const user = new ServiceClient({ baseUrl: t.base, bearer: key });
    await expect(user.call(endpoints.workerHeartbeat, { body: {} })).rejects.toMatchObject({ status: 401 });
  });

  it("reports an answer that is not what the schema says as unexpected_answer", async () => {
    const wrong = endpoint({ method: "GET", path: "/api/users/me", response: QueueStats });
    const client = new ServiceClient({ baseUrl: t.base, apiKey: key });
    const error = await failure(client.call(wrong, {}));
    expect(error).toMatchObject({ status: 200, code: "unexpected_answer" });
    expect(error.detail).toContain("are the client and the service the same version?");
  });

  it("reports a service it cannot reach, or one that does not answer in time, with status 0", async () => {
    const closed = new ServiceClient({ baseUrl: "http://127.0.0.1:9" });
    await expect(closed.call(endpoints.me, {})).rejects.toMatchObject({ status: 0, code: "unreachable" });
    const { port } = silent.address() as AddressInfo;
    const slow = new ServiceClient({ baseUrl: `http://127.0.0.1:${port}`, timeoutMs: 200 });
    const error = await failure(slow.call(endpoints.me, {}));
    expect(error).toMatchObject({ status: 0, code: "timeout" });
    expect(error.detail).toBe(`GET http://127.0.0.1:${port}/api/users/me: no answer within 0.2 s`);
  });

  it("hands back the Response of a raw endpoint, status checked", async () => {
    const client = new ServiceClient({ baseUrl: t.base, apiKey: key });
    await expect(client.call(endpoints.trainingEventStream, { query: { job_id: "local-none" } })).rejects.toMatchObject({
      status: 404,
    });
  });
});

describe("readEventStream", () => {
  it("yields each message with its id, split however the bytes arrive, and reports comments", async () => {
    const text = ': keep-alive\n\nid: 0\ndata: {"type":"log","line":"a"}\n\nid: 1\nevent: end\ndata: {"status":"completed"}\n\n';
    const bytes = new TextEncoder().encode(text);
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let i = 0; i < bytes.length; i += 7) controller.enqueue(bytes.slice(i, i + 7));
        controller.close();
      },
    });
    const comments: string[] = [];
    const messages = [];
    for await (const message of readEventStream(new Response(body), (c) => comments.push(c))) messages.push(message);
    expect(messages).toEqual([
      { id: "0", event: undefined, data: '{"type":"log","line":"a"}' },
      { id: "1", event: "end", data: '{"status":"completed"}' },
    ]);
    expect(comments).toEqual(["keep-alive"]);
  });
});
