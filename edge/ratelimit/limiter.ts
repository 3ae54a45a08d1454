import { DurableObject } from "cloudflare:workers";
import type { Env } from "../env";
import { LEASE_RECORD_AHEAD_MS, type LeaseRequest, type RateVerdict } from "./limiter-types";
import { SlidingWindow } from "./window";

/** Refusals under one rule are audited at most once per this many ms, with the count they stand for. */
const AUDIT_INTERVAL_MS = 1000;
/** A rule's window reaches storage at most this long after it changed. */
const SAVE_DELAY_MS = 1000;
/** A stored window keeps its times exactly up to this many entries, and rounds them up to 1/this of the window beyond. */
const EXACT_SNAPSHOT_ENTRIES = 256;

/** How many admissions of a rule one stored reservation covers beyond those asked for: a quarter of its limit, 1 to 1024. */
const reservationSize = (limit: number) => Math.max(1, Math.min(1024, Math.floor(limit / 4)));
/**
 * A lease gets at most a quarter of what the window still admits, so the last few requests are
 * always decided one by one; and none in a window shorter than 20 × LEASE_RECORD_AHEAD_MS, where
 * the time slots are counted ahead (up to 5 % of the window) would refuse noticeably more.
 */
const leaseSize = (wanted: number, remaining: number, windowMs: number) =>
  windowMs < 20 * LEASE_RECORD_AHEAD_MS ? 0 : Math.max(0, Math.min(wanted, Math.floor(remaining / 4)));

interface RuleState {
  window: SlidingWindow;
  /** Admissions since the window was last stored. */
  sinceSave: number;
  lastAdmittedAt: number;
  /** Admissions after the stored window that the stored reservation covers. */
  reserved: number;
  dirty: boolean;
  refusedSinceAudit: number;
  lastAuditAt: number;
}

/** Admission times (in order) as a stored window's runs: [time, how many at it], oldest first. */
function runsOf(times: readonly number[]): [number, number][] {
  const runs: [number, number][] = [];
  for (const at of times) {
    const last = runs.at(-1);
    if (last && last[0] === at) last[1]++;
    else runs.push([at, 1]);
  }
  return runs;
}

type WindowRow = {
  rule: string;
  limit_calls: number;
  window_ms: number;
  /** JSON [[time, count], ...], oldest first. */
  times: string;
  reserved: number;
};

/*
 * The rate limiter of one client address: one exact
 * sliding window per rule. A Durable Object handles one event at a time and `hit` decides and
 * records without awaiting anything, so concurrent requests of one client can never both take
 * the last slot.
 *
 * Leases: a client sending fast is given, with an admission, a few more admissions ("slots", at
 * most a quarter of what the window still admits) that the Worker spends on its next requests
 * without asking (edge/ratelimit/leases.ts), so a busy client costs one call here per lease rather
 * than one per request. The slots are recorded at once, as admitted at the latest moment the
 * Worker may spend them, so every window counts them for at least as long as it would count the
 * requests that spend them: the window never admits more than its limit. Slots the Worker could
 * not spend in time come back with its next call (`release`) and free their room again.
 *
 * Windows survive an evicted or restarted object, without a storage commit per request (the
 * commit would cost about as much as the rest of the limiter): each rule's window is stored
 * within SAVE_DELAY_MS of a change (one row per rule: its times, exact up to
 * EXACT_SNAPSHOT_ENTRIES, otherwise rounded up, which only keeps them in the window longer), and
 * before admissions that no stored reservation covers, a reservation for them and a few more is
 * written (the answer waits for that write). An object that stops before storing some admissions
 * finds the reservation on restart and counts all of it as admitted at that moment, later than
 * they really were: it may refuse a few requests too many for one window, and never admits one
 * too many. Once every window has expired, an alarm deletes the storage, so an address seen once
 * costs nothing afterwards.
 *
 * Audit entries are coalesced: a client hammering a limit gets at most one `rate_limited` entry
 * per rule and second (the entry counts the refusals it stands for), so a flood of refusals cannot
 * become a flood of audit writes.
 */
export class RateLimiter extends DurableObject<Env> {
  readonly #rules = new Map<string, RuleState>();
  #tableReady = false;
  #alarmArmed = false;
  #saveTimer: ReturnType<typeof setTimeout> | undefined;

  /**
   * Decides on one request under `rule` (at most `limit` in any `windowMs`) and records it when
   * admitted, with up to `options.lease` more slots for the caller to spend within
   * LEASE_RECORD_AHEAD_MS; first takes back the unspent slots of the caller's expired leases.
   */
  async hit(rule: string, limit: number, windowMs: number, options: LeaseRequest = {}): Promise<RateVerdict> {
    const now = Date.now();
    const state = this.#state(rule, limit, windowMs, now);
    for (const { at, count } of options.returned ?? []) if (state.window.release(at, count) > 0) state.dirty = true;
    const verdict = state.window.take(now);
    if (verdict.allowed) {
      let slots = 0;
      let slotsAt = now;
      const wanted = leaseSize(options.lease ?? 0, verdict.remaining, windowMs);
      // Reserved before recorded: the reservation covers the slots, which may be spent before the window is stored.
      if (state.sinceSave + 1 + wanted > state.reserved) this.#reserve(rule, state, state.sinceSave + 1 + wanted + reservationSize(limit));
      if (wanted > 0) ({ count: slots, at: slotsAt } = state.window.record(now, now + LEASE_RECORD_AHEAD_MS, wanted));
      state.sinceSave += 1 + slots;
      state.lastAdmittedAt = now;
      state.dirty = true;
      this.#saveSoon();
      if (!this.#alarmArmed) {
        this.#alarmArmed = true;
        await this.ctx.storage.setAlarm(now + windowMs + LEASE_RECORD_AHEAD_MS);
      }
      return { ...verdict, remaining: verdict.remaining - slots, now, audit: 0, lease: slots > 0 ? { slots, at: slotsAt } : undefined };
    }
    if (state.dirty) this.#saveSoon();
    if (options.holding) return { ...verdict, now, audit: 0 };
    state.refusedSinceAudit += 1;
    if (now - state.lastAuditAt < AUDIT_INTERVAL_MS) return { ...verdict, now, audit: 0 };
    const audit = state.refusedSinceAudit;
    state.refusedSinceAudit = 0;
    state.lastAuditAt = now;
    return { ...verdict, now, audit };
  }

  /**
   * Drops every admission recorded under `rule`: failure limits (a username's failed logins) are
   * forgiven by a success rather than waiting out their window.
   */
  async forget(rule: string): Promise<void> {
    this.#rules.delete(rule);
    this.#ensureTables();
    this.ctx.storage.sql.exec("DELETE FROM windows WHERE rule = ?", rule);
  }

  /** Re-arms for the latest expiry, or, when every recorded admission has left its window, forgets this client. */
  override async alarm(): Promise<void> {
    this.#ensureTables();
    this.#saveAll();
    const now = Date.now();
    let expires = 0;
    for (const row of this.ctx.storage.sql.exec<WindowRow>("SELECT * FROM windows").toArray()) {
      const times = JSON.parse(row.times) as [number, number][];
      // A reservation may stand for admissions made up to now.
      const last = Math.max(times.at(-1)?.[0] ?? 0, row.reserved > 0 ? now : 0);
      expires = Math.max(expires, last + row.window_ms);
    }
    if (expires > now) {
      await this.ctx.storage.setAlarm(expires);
      return;
    }
    await this.ctx.storage.deleteAll();
    this.#rules.clear();
    this.#tableReady = false;
    this.#alarmArmed = false;
  }

  #state(rule: string, limit: number, windowMs: number, now: number): RuleState {
    const known = this.#rules.get(rule);
    if (known && known.window.limit === limit && known.window.windowMs === windowMs) return known;
    let history: number[];
    let lost = 0;
    if (known) history = known.window.history();
    else {
      this.#ensureTables();
      const row = this.ctx.storage.sql.exec<WindowRow>("SELECT * FROM windows WHERE rule = ?", rule).toArray()[0];
      history = row ? (JSON.parse(row.times) as [number, number][]).flatMap(([at, count]) => Array<number>(count).fill(at)) : [];
      // Reserved but never stored: the object stopped first. They happened before now; count them as now.
      lost = row?.reserved ?? 0;
    }
    const lostAt = Math.max(now, history.at(-1) ?? now);
    for (let i = 0; i < Math.min(lost, limit); i++) history.push(lostAt);
    const state: RuleState = {
      window: new SlidingWindow(limit, windowMs, history),
      sinceSave: 0,
      lastAdmittedAt: 0,
      reserved: 0,
      dirty: lost > 0 || known !== undefined,
      refusedSinceAudit: known?.refusedSinceAudit ?? 0,
      lastAuditAt: known?.lastAuditAt ?? 0,
    };
    this.#rules.set(rule, state);
    if (state.dirty) this.#save(rule, state);
    return state;
  }

  /** Stores that admissions up to `reserved` after the stored window may have been made (the answer waits for the write). */
  #reserve(rule: string, state: RuleState, reserved: number): void {
    this.#ensureTables();
    state.reserved = reserved;
    this.ctx.storage.sql.exec(
      "INSERT INTO windows (rule, limit_calls, window_ms, times, reserved) VALUES (?, ?, ?, '[]', ?) ON CONFLICT (rule) DO UPDATE SET reserved = excluded.reserved",
      rule,
      state.window.limit,
      state.window.windowMs,
      reserved,
    );
  }

  /**
   * Stores a rule's window as it is now (its times still in the window) with a reservation of
   * `reserve` admissions after it: the next few of a busy client need no write of their own, and
   * an idle one's reservation is withdrawn, so its window restores exactly.
   */
  #save(rule: string, state: RuleState, reserve = 0): void {
    this.#ensureTables();
    const { limit, windowMs } = state.window;
    const since = Date.now() - windowMs;
    let times = state.window.history().filter((at) => at > since);
    if (times.length > EXACT_SNAPSHOT_ENTRIES) {
      // Rounded up: a time stored later than it was keeps its admission in the window longer, never shorter.
      const step = Math.max(1, Math.ceil(windowMs / EXACT_SNAPSHOT_ENTRIES));
      times = times.map((at) => Math.ceil(at / step) * step);
    }
    this.ctx.storage.sql.exec(
      "INSERT INTO windows (rule, limit_calls, window_ms, times, reserved) VALUES (?, ?, ?, ?, ?) ON CONFLICT (rule) DO UPDATE SET limit_calls = excluded.limit_calls, window_ms = excluded.window_ms, times = excluded.times, reserved = excluded.reserved",
      rule,
      limit,
      windowMs,
      JSON.stringify(runsOf(times)),
      reserve,
    );
    state.sinceSave = 0;
    state.reserved = reserve;
    state.dirty = false;
  }

  /** Stores the changed windows shortly (once per SAVE_DELAY_MS). */
  #saveSoon(): void {
    this.#saveTimer ??= setTimeout(() => this.#saveAll(), SAVE_DELAY_MS);
  }

  // A rule still admitting as it is saved (a busy client) keeps a reservation, so its next
  // admissions need no write of their own, and is saved again shortly; otherwise its reservation
  // is withdrawn, so an object evicted while idle restores its windows exactly.
  #saveAll(): void {
    clearTimeout(this.#saveTimer);
    this.#saveTimer = undefined;
    for (const [rule, state] of this.#rules) {
      if (!state.dirty && state.reserved === 0) continue;
      const busy = Date.now() - state.lastAdmittedAt < SAVE_DELAY_MS / 10;
      this.#save(rule, state, busy ? reservationSize(state.window.limit) : 0);
      if (busy) this.#saveSoon();
    }
  }

  // Created on first use rather than in the constructor: after the alarm's deleteAll the object
  // must not recreate storage until a request is actually recorded.
  #ensureTables(): void {
    if (this.#tableReady) return;
    const sql = this.ctx.storage.sql;
    sql.exec(
      "CREATE TABLE IF NOT EXISTS windows (rule TEXT PRIMARY KEY, limit_calls INTEGER NOT NULL, window_ms INTEGER NOT NULL, times TEXT NOT NULL, reserved INTEGER NOT NULL) WITHOUT ROWID",
    );
    this.#migrateRows();
    this.#tableReady = true;
  }

  /**
   * Windows stored one row per admission (the `hits` and `reservations` tables of earlier
   * versions) become one row per rule, so an upgrade does not reset a window.
   */
  #migrateRows(): void {
    const sql = this.ctx.storage.sql;
    if (sql.exec("SELECT name FROM sqlite_master WHERE name = 'hits'").toArray().length === 0) return;
    const rules = sql.exec<{ rule: string }>("SELECT DISTINCT rule FROM hits UNION SELECT rule FROM reservations").toArray();
    for (const { rule } of rules) {
      const hits = sql
        .exec<{ seq: number; at: number; expires: number }>("SELECT seq, at, expires FROM hits WHERE rule = ? ORDER BY seq", rule)
        .toArray();
      const reserved = sql.exec<{ seq: number }>("SELECT seq FROM reservations WHERE rule = ?", rule).toArray()[0]?.seq ?? 0;
      const windowMs = hits[0] ? hits[0].expires - hits[0].at : 0;
      sql.exec(
        "INSERT OR REPLACE INTO windows (rule, limit_calls, window_ms, times, reserved) VALUES (?, ?, ?, ?, ?)",
        rule,
        hits.length,
        windowMs,
        JSON.stringify(runsOf(hits.map((hit) => hit.at))),
        Math.max(0, reserved - (hits.at(-1)?.seq ?? 0)),
      );
    }
    sql.exec("DROP TABLE hits");
    sql.exec("DROP TABLE IF EXISTS reservations");
  }
}
