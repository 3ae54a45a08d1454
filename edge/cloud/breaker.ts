import type { Database } from "../db/client";
import { ProviderError } from "./types";

/*
 * A circuit breaker per provider (issue 14 item 2): a provider that keeps failing is not called
 * for a while, so requests fail at once with a clear message instead of each waiting out a
 * timeout. The rule is the two pure functions below; the state lives in libSQL (provider_state)
 * so every isolate sees the same breaker, and is written by compare-and-set: a write that lost a
 * race re-reads and applies the outcome again, so no outcome is lost and the rule is not written
 * twice (once here, once in SQL).
 */

/** The breaker's constants: opens after 5 consecutive failures, half-open after 60 s, closes after 2 successes. */
export const BREAKER = { failureThreshold: 5, resetSeconds: 60, closeAfterSuccesses: 2 } as const;

export type BreakerState = "closed" | "open" | "half_open";

/** One provider's breaker. Times are epoch milliseconds. */
export interface BreakerRow {
  state: BreakerState;
  consecutiveFailures: number;
  halfOpenSuccesses: number;
  openedAt: number | null;
  failuresTotal: number;
}

/** The gauge values of service_circuit_breaker_state. */
export const breakerStateValue = { closed: 0, half_open: 1, open: 2 } as const;

const CLOSED: BreakerRow = { state: "closed", consecutiveFailures: 0, halfOpenSuccesses: 0, openedAt: null, failuresTotal: 0 };

/**
 * Pure: may a call go now (`now` in epoch ms)? An open breaker turns half-open once
 * `resetSeconds` have passed since it opened; until then calls are refused, with the seconds left.
 *
 * @example
 * breakerDecision({ ...row, state: "open", openedAt: 0 }, 30_000); // { allow: false, state: "open", retryAfterSeconds: 30 }
 */
export function breakerDecision(
  row: BreakerRow,
  now: number,
  resetSeconds: number = BREAKER.resetSeconds,
): { allow: boolean; state: BreakerState; retryAfterSeconds: number | null } {
  if (row.state !== "open") return { allow: true, state: row.state, retryAfterSeconds: null };
  const reopensAt = (row.openedAt ?? 0) + resetSeconds * 1000;
  if (now >= reopensAt) return { allow: true, state: "half_open", retryAfterSeconds: null };
  return { allow: false, state: "open", retryAfterSeconds: Math.max(1, Math.ceil((reopensAt - now) / 1000)) };
}

/**
 * Pure: the row after a call's outcome. Closed: 5 consecutive failures open it. Half-open: one
 * failure re-opens it (the wait starts again), 2 successes close it. Open (a call admitted before
 * it opened, ending now): its outcome changes nothing but the count. failuresTotal counts every failure.
 *
 * @example
 * afterCall(row, false, Date.now()); // one more failure; open at the fifth in a row
 */
export function afterCall(row: BreakerRow, ok: boolean, now: number): BreakerRow {
  if (!ok) {
    const failed = { ...row, consecutiveFailures: row.consecutiveFailures + 1, failuresTotal: row.failuresTotal + 1 };
    if (row.state === "half_open") return { ...failed, state: "open", halfOpenSuccesses: 0, openedAt: now };
    if (row.state === "closed" && failed.consecutiveFailures >= BREAKER.failureThreshold)
      return { ...failed, state: "open", halfOpenSuccesses: 0, openedAt: now };
    return failed;
  }
  if (row.state === "half_open") {
    const successes = row.halfOpenSuccesses + 1;
    if (successes >= BREAKER.closeAfterSuccesses) return { ...CLOSED, failuresTotal: row.failuresTotal };
    return { ...row, halfOpenSuccesses: successes };
  }
  if (row.state === "closed") return { ...row, consecutiveFailures: 0 };
  return row;
}

/** A call refused because the provider's breaker is open: nothing was sent. */
export class CircuitOpenError extends ProviderError {
  constructor(
    readonly provider: string,
    readonly retryAfterSeconds: number,
  ) {
    super(
      `${provider} failed ${BREAKER.failureThreshold} times in a row, so calls to it are paused (circuit breaker open); the next try is allowed in ${retryAfterSeconds} s`,
      null,
      false,
    );
    this.name = "CircuitOpenError";
  }
}

const ROW_SQL = `SELECT breaker_state, consecutive_failures, half_open_successes, opened_at, failures_total FROM provider_state WHERE provider = ?`;

/** The stored row (a closed one when the provider has none yet), and whether it exists. */
async function readRow(db: Database, provider: string): Promise<{ row: BreakerRow; exists: boolean }> {
  const result = await db.$client.execute({ sql: ROW_SQL, args: [provider] });
  const r = result.rows[0];
  if (!r) return { row: { ...CLOSED }, exists: false };
  const state = String(r.breaker_state);
  return {
    row: {
      state: state === "open" || state === "half_open" ? state : "closed",
      consecutiveFailures: Number(r.consecutive_failures),
      halfOpenSuccesses: Number(r.half_open_successes),
      openedAt: r.opened_at === null ? null : Date.parse(String(r.opened_at)),
      failuresTotal: Number(r.failures_total),
    },
    exists: true,
  };
}

const sameRow = (a: BreakerRow, b: BreakerRow) =>
  a.state === b.state &&
  a.consecutiveFailures === b.consecutiveFailures &&
  a.halfOpenSuccesses === b.halfOpenSuccesses &&
  a.openedAt === b.openedAt &&
  a.failuresTotal === b.failuresTotal;

const isoOrNull = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

/** Writes `next` only if the stored row is still `before`; false when another call changed it first. */
async function compareAndSet(db: Database, provider: string, before: { row: BreakerRow; exists: boolean }, next: BreakerRow) {
  const values = [next.state, next.consecutiveFailures, next.halfOpenSuccesses, isoOrNull(next.openedAt), next.failuresTotal];
  if (!before.exists) {
    const inserted = await db.$client.execute({
      sql: `INSERT INTO provider_state (provider, breaker_state, consecutive_failures, half_open_successes, opened_at, failures_total)
            VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (provider) DO NOTHING RETURNING provider`,
      args: [provider, ...values],
    });
    return inserted.rows.length > 0;
  }
  const b = before.row;
  const updated = await db.$client.execute({
    sql: `UPDATE provider_state SET breaker_state = ?, consecutive_failures = ?, half_open_successes = ?, opened_at = ?, failures_total = ?
          WHERE provider = ? AND breaker_state = ? AND consecutive_failures = ? AND half_open_successes = ?
            AND opened_at IS ? AND failures_total = ? RETURNING provider`,
    args: [...values, provider, b.state, b.consecutiveFailures, b.halfOpenSuccesses, isoOrNull(b.openedAt), b.failuresTotal],
  });
  return updated.rows.length > 0;
}

// Contention is a handful of concurrent calls to one provider; past this many lost races the
// outcome is dropped rather than looping (the breaker is advisory, never the call's own result).
const MAX_TRIES = 8;

/** Reads, applies `step`, writes by compare-and-set; again on a lost race. Returns the row written (or read, when unchanged). */
async function transition(db: Database, provider: string, step: (row: BreakerRow) => BreakerRow): Promise<BreakerRow> {
  let current = await readRow(db, provider);
  for (let i = 0; i < MAX_TRIES; i++) {
    const next = step(current.row);
    // A first call creates the row even when nothing changed, so the metrics list every provider used.
    if ((current.exists && sameRow(next, current.row)) || (await compareAndSet(db, provider, current, next))) return next;
    current = await readRow(db, provider);
  }
  return current.row;
}

/**
 * Lets a call to `provider` go, or throws CircuitOpenError while its breaker is open. An open
 * breaker past its reset time is stored as half-open here, so the next outcomes decide.
 *
 * @example
 * await breakerAdmit(db, "replicate"); // throws CircuitOpenError while open
 */
export async function breakerAdmit(db: Database, provider: string, now = Date.now(), resetSeconds: number = BREAKER.resetSeconds) {
  const row = await transition(db, provider, (row) => {
    const decision = breakerDecision(row, now, resetSeconds);
    return decision.allow && row.state === "open" ? { ...row, state: "half_open", halfOpenSuccesses: 0 } : row;
  });
  const decision = breakerDecision(row, now, resetSeconds);
  if (!decision.allow) throw new CircuitOpenError(provider, decision.retryAfterSeconds ?? resetSeconds);
}

/**
 * Records a call's outcome (`ok` false: a network failure, a timeout or a 5xx) in the provider's
 * breaker; its row is created on first use.
 *
 * @example
 * await breakerRecord(db, "replicate", response.status < 500);
 */
export async function breakerRecord(db: Database, provider: string, ok: boolean, now = Date.now()): Promise<void> {
  await transition(db, provider, (row) => afterCall(row, ok, now));
}

/**
 * Every provider's breaker that has been used, for the metrics (circuit_breakers).
 *
 * @example
 * for (const b of await breakerStates(db)) gauge.set({ provider: b.provider }, breakerStateValue[b.state]);
 */
export async function breakerStates(db: Database): Promise<{ provider: string; state: BreakerState; failures_total: number }[]> {
  const result = await db.$client.execute(`SELECT provider, breaker_state, failures_total FROM provider_state ORDER BY provider`);
  return result.rows.map((r) => {
    const state = String(r.breaker_state);
    return {
      provider: String(r.provider),
      state: state === "open" || state === "half_open" ? state : "closed",
      failures_total: Number(r.failures_total),
    };
  });
}
