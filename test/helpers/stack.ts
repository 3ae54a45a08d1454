import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startStack, type Stack, type StackOptions } from "../../edge/local/stack";
import { inject } from "vitest";
import { stopWhenDone, tracked } from "./cleanup";

export interface Reply<T = any> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

export interface Credentials {
  key?: string;
  bearer?: string;
  cookie?: string;
}

export interface TestStack {
  stack: Stack;
  base: string;
  dataDir: string;
  /** Every log line the host and the Worker printed. */
  lines: string[];
  call<T = any>(
    method: string,
    path: string,
    options?: {
      json?: unknown;
      body?: BodyInit;
      auth?: Credentials;
      headers?: Record<string, string>;
      /** An answer that is an event stream is not read (it may never end): its status and headers, text "". */
      streamHeadersOnly?: boolean;
    },
  ): Promise<Reply<T>>;
  stop(options?: { keepData?: boolean }): Promise<void>;
}

/**
 * Worker variables every test stack gets (more `bindings` override them): production timers
 * shortened, so tests wait on their conditions instead of the production periods.
 */
export const TEST_TIMERS: Record<string, string> = {
  // Live streams' keep-alive (15 s): a closed stream's place is freed within two of them.
  LIVE_KEEPALIVE_SECONDS: "1",
  // The Scheduler's background pass (5 s): what waits on a timer pass (a starvation reservation, a
  // sweep) is seen within a second.
  SCHEDULER_PASS_SECONDS: "1",
};

let workerScript: string | undefined;
/** The Worker bundled once for the run (test/helpers/global-setup.ts), read once per file. */
export function bundledWorker(): string {
  return (workerScript ??= readFileSync(inject("workerBundle"), "utf8"));
}

/** A fresh data directory under the system temp dir. */
export const tempDataDir = () => mkdtempSync(join(tmpdir(), "training-service-test-"));

/**
 * Starts the real local stack (workerd, libSQL, R2) on a free loopback port; `bindings`: more
 * Worker variables; `more`: other stack options (e.g. the local runner). It is stopped at the end
 * of the file if the test has not stopped it (test/helpers/cleanup.ts), whatever the outcome.
 */
export async function startTestStack(
  dataDir = tempDataDir(),
  bindings?: Record<string, string>,
  more: Partial<StackOptions> = {},
): Promise<TestStack> {
  const lines: string[] = [];
  const stack = await tracked(
    startStack({
      dataDir,
      host: "127.0.0.1",
      port: 0,
      logFormat: "json",
      logLevel: "DEBUG",
      output: (line) => lines.push(line),
      bindings: { ...TEST_TIMERS, ...bindings },
      workerScript: bundledWorker(),
      ...more,
    }),
  );
  const stopStack = stopWhenDone(() => stack.stop());
  const base = stack.url.origin;
  return {
    stack,
    base,
    dataDir,
    lines,
    async call(method, path, options = {}) {
      const headers: Record<string, string> = { ...options.headers };
      if (options.json !== undefined) headers["content-type"] ??= "application/json";
      if (options.auth?.key) headers["x-api-key"] = options.auth.key;
      if (options.auth?.bearer) headers["authorization"] = `Bearer ${options.auth.bearer}`;
      if (options.auth?.cookie) headers["cookie"] = options.auth.cookie;
      const response = await fetch(base + path, {
        method,
        headers,
        body: options.json !== undefined ? JSON.stringify(options.json) : options.body,
        redirect: "manual",
      });
      if (options.streamHeadersOnly && response.headers.get("content-type")?.startsWith("text/event-stream")) {
        await response.body?.cancel();
        return { status: response.status, headers: response.headers, body: "" as any, text: "" };
      }
      const text = await response.text();
      let body: any = text;
      try {
        body = JSON.parse(text);
      } catch {}
      return { status: response.status, headers: response.headers, body, text };
    },
    async stop({ keepData = false } = {}) {
      await stopStack();
      if (!keepData) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * The stack with `npm start`'s own runner as its local box (no GPUs: CPU jobs of the demo
 * trainer), its job directories under `runnerDir`; `runnerConfig`: more of its runner config
 * (say, `simpletuner`: an installation made by test/helpers/simpletuner.ts).
 *
 * @example
 * t = await startStackWithLocalRunner(mkdtempSync(join(tmpdir(), "my-test-runner-")));
 */
export async function startStackWithLocalRunner(runnerDir: string, runnerConfig: Record<string, unknown> = {}): Promise<TestStack> {
  const config = join(runnerDir, "runner.json");
  writeFileSync(config, JSON.stringify({ work_dir: join(runnerDir, "work"), ...runnerConfig }));
  return startTestStack(undefined, undefined, { localRunner: true, runnerConfig: config, runnerEnv: { PATH: process.env.PATH } });
}

/** The `name=value` of the session cookie set by a response. */
export function sessionCookie(reply: Reply): string {
  const setCookie = reply.headers.get("set-cookie") ?? "";
  const match = /((?:__Host-)?st_session=[^;]+)/.exec(setCookie);
  if (!match) throw new Error(`no session cookie in ${JSON.stringify(setCookie)}`);
  return match[1]!;
}

export const ADMIN = { email: "admin@example.com", username: "admin", password: "admin-password-1" };

/** Creates the first admin; returns its session cookie and an API key. */
export async function setUpAdmin(t: TestStack): Promise<{ cookie: string; key: string }> {
  const created = await t.call("POST", "/api/cloud/auth/setup/first-admin", { json: ADMIN });
  if (created.status !== 201) throw new Error(`first admin: ${created.status} ${created.text}`);
  const cookie = sessionCookie(created);
  const key = await t.call("POST", "/api/cloud/auth/api-keys", { json: { name: "test" }, auth: { cookie } });
  if (key.status !== 201) throw new Error(`api key: ${key.status} ${key.text}`);
  return { cookie, key: key.body.key };
}

/** Creates a user at `level` (as the admin), logs them in and gives them a key. */
export async function createUserWithKey(
  t: TestStack,
  admin: Credentials,
  level: string,
  username = `${level}-user`,
): Promise<{ cookie: string; key: string; id: number }> {
  const password = `${username}-password`;
  const created = await t.call("POST", "/api/users", {
    json: { email: `${username}@example.com`, username, password, level_names: [level] },
    auth: admin,
  });
  if (created.status !== 201) throw new Error(`create ${username}: ${created.status} ${created.text}`);
  const login = await t.call("POST", "/api/cloud/auth/login", { json: { username, password } });
  const cookie = sessionCookie(login);
  const key = await t.call("POST", "/api/cloud/auth/api-keys", { json: { name: "k" }, auth: { cookie } });
  return { cookie, key: key.body.key, id: created.body.id };
}
