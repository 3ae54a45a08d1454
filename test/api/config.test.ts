// The Worker's variables read by edge/config.ts that tests shorten: a production default when
// unset, the value given otherwise, and a clear 500 naming a bad one.
import { describe, expect, it } from "vitest";
import { KEEPALIVE_MS, PASS_INTERVAL_MS, readConfig, STREAMS_PER_USER } from "../../edge/config";
import type { Env } from "../../edge/env";

const env = (vars: Partial<Env> = {}) => ({ LIBSQL_URL: "http://libsql.internal", ...vars }) as Env;

describe("LIVE_KEEPALIVE_SECONDS", () => {
  it("is 15 s unless set, and may be a fraction of a second", () => {
    expect(KEEPALIVE_MS).toBe(15_000);
    expect(readConfig(env()).keepAliveMs).toBe(15_000);
    expect(readConfig(env({ LIVE_KEEPALIVE_SECONDS: "2" })).keepAliveMs).toBe(2_000);
    expect(readConfig(env({ LIVE_KEEPALIVE_SECONDS: "0.5" })).keepAliveMs).toBe(500);
  });

  it("refuses what is not a positive number, naming the variable", () => {
    for (const bad of ["0", "-1", "soon", "Infinity"])
      expect(() => readConfig(env({ LIVE_KEEPALIVE_SECONDS: bad }))).toThrow(
        `LIVE_KEEPALIVE_SECONDS must be a positive number of seconds, not ${JSON.stringify(bad)}`,
      );
  });
});

describe("SCHEDULER_PASS_SECONDS", () => {
  it("is 5 s unless set", () => {
    expect(PASS_INTERVAL_MS).toBe(5_000);
    expect(readConfig(env()).passIntervalMs).toBe(5_000);
    expect(readConfig(env({ SCHEDULER_PASS_SECONDS: "1" })).passIntervalMs).toBe(1_000);
  });

  it("refuses what is not a positive number, naming the variable", () => {
    for (const bad of ["0", "-5", "often"])
      expect(() => readConfig(env({ SCHEDULER_PASS_SECONDS: bad }))).toThrow(
        `SCHEDULER_PASS_SECONDS must be a positive number of seconds, not ${JSON.stringify(bad)}`,
      );
  });
});

describe("LIVE_STREAMS_PER_USER", () => {
  it("is 10 unless set", () => {
    expect(STREAMS_PER_USER).toBe(10);
    expect(readConfig(env()).streamsPerUser).toBe(10);
    expect(readConfig(env({ LIVE_STREAMS_PER_USER: "2000" })).streamsPerUser).toBe(2000);
  });

  it("refuses what is not a whole number from 1 to 100000, naming the variable", () => {
    for (const bad of ["0", "-1", "2.5", "many", "100001"])
      expect(() => readConfig(env({ LIVE_STREAMS_PER_USER: bad }))).toThrow(
        `LIVE_STREAMS_PER_USER must be a whole number from 1 to 100000, not ${JSON.stringify(bad)}`,
      );
  });
});
