// The circuit breaker per provider (issue 14 item 2): its pure transitions, its state in libSQL
// (provider_state, through the same client and Hrana bridge the Worker uses), and the outbound
// layer that feeds it, run in Node against a real HTTP server: 5xx and unanswered calls count as
// failures, a 4xx does not, and an open breaker refuses calls without sending anything.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  afterCall,
  BREAKER,
  breakerAdmit,
  breakerDecision,
  breakerRecord,
  breakerStates,
  breakerStateValue,
  CircuitOpenError,
  type BreakerRow,
} from "../../edge/cloud/breaker";
import { providerFetch, readOutboundVariables } from "../../edge/cloud/outbound";
import { ProviderError } from "../../edge/cloud/types";
import type { Database } from "../../edge/db/client";
import type { Env } from "../../edge/env";
import { createLogger } from "../../edge/log";
import { providerDefaults } from "../../edge/cloud/provider-settings";
import { openMigratedDb, type MigratedDb } from "../helpers/migrated-db";

const closed = (): BreakerRow => ({ state: "closed", consecutiveFailures: 0, halfOpenSuccesses: 0, openedAt: null, failuresTotal: 0 });
const T0 = Date.parse("2026-03-01T12:00:00.000Z");
const fail = (row: BreakerRow, times: number, now = T0) =>
  Array.from({ length: times }).reduce<BreakerRow>((r) => afterCall(r, false, now), row);

describe("transitions (pure)", () => {
  it("stays closed through 4 consecutive failures and opens at the 5th", () => {
    const four = fail(closed(), 4);
    expect(four).toEqual({ state: "closed", consecutiveFailures: 4, halfOpenSuccesses: 0, openedAt: null, failuresTotal: 4 });
    expect(breakerDecision(four, T0)).toEqual({ allow: true, state: "closed", retryAfterSeconds: null });
    expect(afterCall(four, false, T0 + 5)).toEqual({
      state: "open",
      consecutiveFailures: 5,
      halfOpenSuccesses: 0,
      openedAt: T0 + 5,
      failuresTotal: 5,
    });
  });

  it("forgets failures that a success interrupts, but keeps counting them in total", () => {
    const row = afterCall(fail(closed(), 4), true, T0);
    expect(row).toEqual({ state: "closed", consecutiveFailures: 0, halfOpenSuccesses: 0, openedAt: null, failuresTotal: 4 });
    expect(fail(row, 4).state).toBe("closed");
  });

  it("refuses calls while open, saying when to retry, and turns half-open once the reset time has passed", () => {
    const open = fail(closed(), 5);
    expect(breakerDecision(open, T0)).toEqual({ allow: false, state: "open", retryAfterSeconds: 60 });
    expect(breakerDecision(open, T0 + 59_001)).toEqual({ allow: false, state: "open", retryAfterSeconds: 1 });
    expect(breakerDecision(open, T0 + 60_000)).toEqual({ allow: true, state: "half_open", retryAfterSeconds: null });
    expect(breakerDecision(open, T0 + 2_000, 2)).toEqual({ allow: true, state: "half_open", retryAfterSeconds: null });
  });

  it("closes after 2 successes in half-open, admitting every call meanwhile", () => {
    const halfOpen: BreakerRow = { ...fail(closed(), 5), state: "half_open" };
    const one = afterCall(halfOpen, true, T0 + 61_000);
    expect(one).toMatchObject({ state: "half_open", halfOpenSuccesses: 1 });
    expect(breakerDecision(one, T0 + 61_000).allow).toBe(true);
    expect(afterCall(one, true, T0 + 62_000)).toEqual({
      state: "closed",
      consecutiveFailures: 0,
      halfOpenSuccesses: 0,
      openedAt: null,
      failuresTotal: 5,
    });
  });

  it("re-opens at one failure in half-open, and the wait starts again", () => {
    const halfOpen: BreakerRow = { ...fail(closed(), 5), state: "half_open", halfOpenSuccesses: 1 };
    const reopened = afterCall(halfOpen, false, T0 + 70_000);
    expect(reopened).toMatchObject({ state: "open", openedAt: T0 + 70_000, halfOpenSuccesses: 0, failuresTotal: 6 });
    expect(breakerDecision(reopened, T0 + 100_000)).toEqual({ allow: false, state: "open", retryAfterSeconds: 30 });
  });

  it("lets the late outcome of a call admitted before it opened change nothing but the count", () => {
    const open = fail(closed(), 5);
    expect(afterCall(open, true, T0 + 1)).toEqual(open);
    expect(afterCall(open, false, T0 + 1)).toEqual({ ...open, consecutiveFailures: 6, failuresTotal: 6 });
  });

  it("maps states to the gauge values of the metrics", () => {
    expect(breakerStateValue).toEqual({ closed: 0, half_open: 1, open: 2 });
    expect(BREAKER).toEqual({ failureThreshold: 5, resetSeconds: 60, closeAfterSuccesses: 2 });
  });
});

let migrated: MigratedDb;
let db: Database;
beforeAll(async () => {
  migrated = await openMigratedDb();
  db = { $client: migrated.client } as unknown as Database;
});
afterAll(() => migrated.close());

const stored = async (provider: string) =>
  (await migrated.client.execute({ sql: "SELECT * FROM provider_state WHERE provider = ?", args: [provider] })).rows[0];

describe("state in provider_state", () => {
  it("creates the row on first use, opens after 5 failures and refuses with CircuitOpenError until the reset", async () => {
    expect(await stored("p1")).toBeUndefined();
    await breakerAdmit(db, "p1", T0);
    await breakerRecord(db, "p1", true, T0);
    for (let i = 0; i < 5; i++) await breakerRecord(db, "p1", false, T0 + i);
    const row = await stored("p1");
    expect(row).toMatchObject({
      breaker_state: "open",
      consecutive_failures: 5,
      failures_total: 5,
      opened_at: new Date(T0 + 4).toISOString(),
    });
    const refused = await breakerAdmit(db, "p1", T0 + 10_004).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(CircuitOpenError);
    expect(refused).toBeInstanceOf(ProviderError);
    expect(refused).toMatchObject({ retryAfterSeconds: 50, status: null, countsAsFailure: false });
    expect((refused as Error).message).toBe(
      "p1 failed 5 times in a row, so calls to it are paused (circuit breaker open); the next try is allowed in 50 s",
    );
    // Past the reset: admitted, and stored as half-open so the next outcomes decide.
    await breakerAdmit(db, "p1", T0 + 60_004);
    expect(await stored("p1")).toMatchObject({ breaker_state: "half_open" });
    await breakerRecord(db, "p1", true, T0 + 60_010);
    await breakerRecord(db, "p1", true, T0 + 60_020);
    expect(await stored("p1")).toMatchObject({ breaker_state: "closed", consecutive_failures: 0, opened_at: null, failures_total: 5 });
  });

  it("honours a shorter reset (CIRCUIT_BREAKER_RESET_SECONDS) and re-opens at a failure in half-open", async () => {
    for (let i = 0; i < 5; i++) await breakerRecord(db, "p2", false, T0);
    await expect(breakerAdmit(db, "p2", T0 + 1_000, 2)).rejects.toMatchObject({ retryAfterSeconds: 1 });
    await breakerAdmit(db, "p2", T0 + 2_000, 2);
    await breakerRecord(db, "p2", false, T0 + 2_100);
    expect(await stored("p2")).toMatchObject({ breaker_state: "open", opened_at: new Date(T0 + 2_100).toISOString(), failures_total: 6 });
  });

  it("loses no outcome when calls finish at the same moment", async () => {
    await Promise.all(Array.from({ length: 5 }, () => breakerRecord(db, "p3", false, T0)));
    expect(await stored("p3")).toMatchObject({ breaker_state: "open", failures_total: 5 });
  });

  it("lists every provider's state and failures for the metrics", async () => {
    const states = await breakerStates(db);
    expect(states.filter((s) => ["p1", "p2", "p3"].includes(s.provider))).toEqual([
      { provider: "p1", state: "closed", failures_total: 5 },
      { provider: "p2", state: "open", failures_total: 6 },
      { provider: "p3", state: "open", failures_total: 5 },
    ]);
  });
});

describe("the outbound layer feeding it (deployed path: the global fetch)", () => {
  let server: Server;
  let base: string;
  let hits = 0;
  let answer = 200;
  beforeAll(async () => {
    server = createServer((req, res) => {
      hits++;
      if (req.url === "/hang") return; // never answers
      res.writeHead(answer, { "content-type": "application/json" }).end(JSON.stringify({ status: answer }));
    });
    await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => {
    server.closeAllConnections();
    server.close();
  });
  beforeEach(() => {
    hits = 0;
  });

  const lines: string[] = [];
  const log = createLogger("test", { logLevel: "DEBUG", logFormat: "json" }, null, (line) => lines.push(line));
  const env = (vars: Partial<Env> = {}) => ({ CIRCUIT_BREAKER_RESET_SECONDS: "1", ...vars }) as Env;

  it("counts a 4xx as the provider being up: the breaker never opens, and the response is returned as it came", async () => {
    answer = 422;
    const call = providerFetch({ env: env(), db, log }, "four", providerDefaults());
    for (let i = 0; i < 7; i++) {
      const response = await call(`${base}/v1/trainings`, { method: "POST", headers: { authorization: "Bearer r8_secret" }, body: "{}" });
      expect(response.status).toBe(422);
      expect(await response.json()).toEqual({ status: 422 });
    }
    expect(await stored("four")).toMatchObject({ breaker_state: "closed", failures_total: 0 });
    expect(hits).toBe(7);
  });

  it("opens after five 5xx answers, then refuses without sending anything, and recovers after the reset with 2 successes", async () => {
    answer = 503;
    const call = providerFetch({ env: env(), db, log }, "five", providerDefaults());
    for (let i = 0; i < 5; i++) expect((await call(`${base}/v1/account`)).status).toBe(503);
    await expect(call(`${base}/v1/account`)).rejects.toBeInstanceOf(CircuitOpenError);
    expect(hits).toBe(5);
    await new Promise((done) => setTimeout(done, 1_100));
    answer = 200;
    expect((await call(`${base}/v1/account`)).status).toBe(200);
    expect(await stored("five")).toMatchObject({ breaker_state: "half_open", half_open_successes: 1 });
    expect((await call(`${base}/v1/account`)).status).toBe(200);
    expect(await stored("five")).toMatchObject({ breaker_state: "closed", failures_total: 5 });
  });

  it("counts a timeout as a failure, with a message naming the provider and the seconds", async () => {
    const call = providerFetch({ env: env({ SERVICE_HTTP_TIMEOUT: "0.3" }), db, log }, "slow", providerDefaults());
    const error = await call(`${base}/hang`).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ProviderError);
    expect(error).toMatchObject({ message: "slow did not answer within 0.3 s", status: null, countsAsFailure: true });
    expect(await stored("slow")).toMatchObject({ consecutive_failures: 1, failures_total: 1 });
  });

  it("uses the provider's own http_timeout over SERVICE_HTTP_TIMEOUT when it is not the default", async () => {
    const call = providerFetch({ env: env({ SERVICE_HTTP_TIMEOUT: "60" }), db, log }, "own-timeout", {
      ...providerDefaults(),
      http_timeout: 0.2,
    });
    await expect(call(`${base}/hang`)).rejects.toMatchObject({ message: "own-timeout did not answer within 0.2 s" });
  });

  it("counts an unreachable provider as a failure", async () => {
    const call = providerFetch({ env: env(), db, log }, "gone", providerDefaults());
    const error = await call("http://127.0.0.1:1/v1/account").catch((e: unknown) => e);
    expect(error).toMatchObject({ status: null, countsAsFailure: true });
    expect((error as Error).message).toMatch(/^gone could not be reached \(/);
    expect(await stored("gone")).toMatchObject({ failures_total: 1 });
  });

  it("logs each call at DEBUG with provider, method, path, status and time, never a header", () => {
    const calls = lines.map((l) => JSON.parse(l)).filter((l) => l.message === "provider call");
    expect(calls[0]).toMatchObject({ level: "DEBUG", extra: { provider: "four", method: "POST", path: "/v1/trainings", status: 422 } });
    expect(typeof calls[0].extra.ms).toBe("number");
    expect(lines.join("\n")).not.toContain("r8_secret");
  });

  it("refuses a bad SERVICE_HTTP_TIMEOUT or CIRCUIT_BREAKER_RESET_SECONDS with a message naming it", () => {
    expect(() => readOutboundVariables({ SERVICE_HTTP_TIMEOUT: "soon" })).toThrow(
      'SERVICE_HTTP_TIMEOUT must be a number of seconds above 0 and at most 3600, not "soon"',
    );
    expect(() => readOutboundVariables({ CIRCUIT_BREAKER_RESET_SECONDS: "-1" })).toThrow(/^CIRCUIT_BREAKER_RESET_SECONDS must be/);
    expect(readOutboundVariables({})).toEqual({ httpTimeout: null, resetSeconds: 60 });
  });
});
