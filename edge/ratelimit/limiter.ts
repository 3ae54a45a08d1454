import { DurableObject } from "cloudflare:workers";
import type { Env } from "../env";
import type { RateVerdict } from "./limiter-types";
import { SlidingWindow } from "./window";

/** Refusals under one rule are audited at most once per this many ms, with the count they stand for. */
const AUDIT_INTERVAL_MS = 1000;
/** Admissions reach storage at most this long after their answer. */
const SAVE_DELAY_MS = 1000;

/** How many admissions of a rule one stored reservation covers: a quarter of its limit, 1 to 64. */
const reservationSize = (limit: number) => Math.max(1, Math.min(64, Math.floor(limit / 4)));

interface RuleState {
  window: SlidingWindow;
  /** Admissions ever recorded under this rule: the number of the newest. */
  seq: number;
  /** Admissions up to this number are covered by the stored reservation. */
  reserved: number;
  /** Admissions (number, time) not stored yet. */
  unsaved: [number, number][];
  refusedSinceAudit: number;
  lastAuditAt: number;
}

/*
 * The rate limiter of one client address: one exact
 * sliding window per rule. A Durable Object handles one event at a time and `hit` decides and
 * records without awaiting anything, so concurrent requests of one client can never both take
 * the last slot.
 *
 * Windows survive an evicted or restarted object, without a storage commit per request (the
 * commit would cost about as much as the rest of the limiter): admissions are stored in batches
 * within SAVE_DELAY_MS, and before an admission that no stored reservation covers, a reservation
 * for the next few is written (the answer waits for that write). An object that stops before
 * storing some admissions finds their reservation on restart and counts them as admitted at that
 * moment, later than they really were: it may refuse a few requests too many for one window, and
 * never admits one too many. Once every window has expired, an alarm deletes the storage, so an
 * address seen once costs nothing afterwards.
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

  /** Decides on one request under `rule` (at most `limit` in any `windowMs`) and records it when admitted. */
  async hit(rule: string, limit: number, windowMs: number): Promise<RateVerdict> {
    const now = Date.now();
    const state = this.#state(rule, limit, windowMs, now);
    const verdict = state.window.take(now);
    if (verdict.allowed) {
      state.seq += 1;
      state.unsaved.push([state.seq, state.window.newest!]);
      if (state.seq > state.reserved) this.#save(rule, state, reservationSize(limit));
      this.#saveSoon();
      if (!this.#alarmArmed) {
        this.#alarmArmed = true;
        await this.ctx.storage.setAlarm(now + windowMs);
      }
      return { ...verdict, now, audit: 0 };
    }
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
    this.ctx.storage.sql.exec("DELETE FROM hits WHERE rule = ?", rule);
    this.ctx.storage.sql.exec("DELETE FROM reservations WHERE rule = ?", rule);
  }

  /** Re-arms for the latest expiry, or, when every recorded admission has left its window, forgets this client. */
  override async alarm(): Promise<void> {
    this.#ensureTables();
    this.#saveAll();
    const { expires } = this.ctx.storage.sql.exec<{ expires: number | null }>("SELECT max(expires) AS expires FROM hits").one();
    if (expires !== null && expires > Date.now()) {
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
    if (known) this.#save(rule, known, 0);
    this.#ensureTables();
    const sql = this.ctx.storage.sql;
    const rows = sql
      .exec<{ seq: number; at: number }>("SELECT seq, at FROM hits WHERE rule = ? ORDER BY seq DESC LIMIT ?", rule, limit)
      .toArray()
      .reverse();
    const reserved = sql.exec<{ seq: number }>("SELECT seq FROM reservations WHERE rule = ?", rule).toArray()[0]?.seq ?? 0;
    const stored = rows.at(-1)?.seq ?? 0;
    const history = rows.map((row) => row.at);
    // Reserved but never stored: the object stopped first. They happened before now; count them as now.
    const lostAt = Math.max(now, history.at(-1) ?? now);
    const lost: [number, number][] = [];
    for (let seq = Math.max(stored, reserved - limit) + 1; seq <= reserved; seq++) lost.push([seq, lostAt]);
    const state: RuleState = {
      window: new SlidingWindow(limit, windowMs, [...history, ...lost.map(([, at]) => at)]),
      seq: Math.max(stored, reserved),
      reserved: Math.max(stored, reserved),
      unsaved: lost,
      refusedSinceAudit: known?.refusedSinceAudit ?? 0,
      lastAuditAt: known?.lastAuditAt ?? 0,
    };
    if (lost.length) this.#save(rule, state, 0);
    this.#rules.set(rule, state);
    return state;
  }

  /** Stores a rule's unsaved admissions, drops rows beyond its newest `limit`, and reserves `ahead` more. */
  #save(rule: string, state: RuleState, ahead: number): void {
    this.#ensureTables();
    const sql = this.ctx.storage.sql;
    const windowMs = state.window.windowMs;
    for (const [seq, at] of state.unsaved)
      sql.exec("INSERT INTO hits (rule, seq, at, expires) VALUES (?, ?, ?, ?)", rule, seq, at, at + windowMs);
    state.unsaved = [];
    sql.exec("DELETE FROM hits WHERE rule = ? AND seq <= ?", rule, state.seq - state.window.limit);
    state.reserved = state.seq + ahead;
    sql.exec(
      "INSERT INTO reservations (rule, seq) VALUES (?, ?) ON CONFLICT (rule) DO UPDATE SET seq = excluded.seq",
      rule,
      state.reserved,
    );
  }

  /** Stores the unsaved admissions and withdraws the reservations shortly (once per SAVE_DELAY_MS). */
  #saveSoon(): void {
    this.#saveTimer ??= setTimeout(() => this.#saveAll(), SAVE_DELAY_MS);
  }

  // Withdrawing the reservations too: an object evicted while idle restores its windows exactly.
  #saveAll(): void {
    clearTimeout(this.#saveTimer);
    this.#saveTimer = undefined;
    for (const [rule, state] of this.#rules) if (state.unsaved.length || state.reserved > state.seq) this.#save(rule, state, 0);
  }

  // Created on first use rather than in the constructor: after the alarm's deleteAll the object
  // must not recreate storage until a request is actually recorded.
  #ensureTables(): void {
    if (this.#tableReady) return;
    const sql = this.ctx.storage.sql;
    sql.exec(
      "CREATE TABLE IF NOT EXISTS hits (rule TEXT NOT NULL, seq INTEGER NOT NULL, at INTEGER NOT NULL, expires INTEGER NOT NULL, PRIMARY KEY (rule, seq)) WITHOUT ROWID",
    );
    sql.exec("CREATE TABLE IF NOT EXISTS reservations (rule TEXT PRIMARY KEY, seq INTEGER NOT NULL)");
    this.#tableReady = true;
  }
}
