import type { RateRule } from "../../shared/rate-rules";
import { LEASE_RECORD_AHEAD_MS, type LeaseReturn, type RateLimiterApi, type RateVerdict } from "./limiter-types";

/**
 * How long after asking the Worker spends a lease's slots, by its own clock: half the time the
 * limiter counts them ahead, so a late clock (a Worker's advances at I/O) or a slow answer
 * cannot make a slot spent after the moment the limiter recorded it at.
 */
const SPEND_WITHIN_MS = LEASE_RECORD_AHEAD_MS / 2;
/** The most slots asked for at once. */
const MOST_SLOTS = 256;
/**
 * Clients whose leases one isolate remembers; past it the one that asked longest ago is forgotten
 * (its slots unspent until its window has passed, which only refuses more).
 */
const MOST_CLIENTS = 4096;

interface Lease {
  left: number;
  size: number;
  /** Local epoch ms after which no slot of it is spent. */
  until: number;
  /** The time the limiter recorded its slots at (given back with them). */
  at: number;
}

interface Client {
  leases: Lease[];
  /** Unspent slots of expired leases, given back with the next call. */
  returns: LeaseReturn[];
  /** Requests since the last call that asked for slots, and when that was: the client's pace. */
  seen: number;
  lastAsked: number;
  /** Calls in flight. */
  asking: number;
  /** Calls in flight that asked for slots. */
  askingSlots: number;
  /** The limiter's latest answer: what the window still admits beyond this isolate's unspent slots, and when it next frees room. */
  remaining: number;
  resetAt: number;
  decidedAt: number;
}

/**
 * One isolate's leases on the rate limiter (edge/ratelimit/limiter.ts): a client that sends
 * several requests within SPEND_WITHIN_MS is given slots with an admission, about as many as it
 * sends in SPEND_WITHIN_MS, and its next requests spend them here without a call to the limiter,
 * until they run out or SPEND_WITHIN_MS has passed since the call that got them. One request asks
 * for the next lease a little before that, while the others spend what is left. Exactness is the
 * limiter's: it recorded the slots as admitted, at a moment no slot is spent after, before it
 * answered, and grants at most a quarter of what the window still admits (none in windows under
 * 4 s); unspent slots go back with the next call. A request the limiter refuses while its client
 * holds slots is admitted by one, so slots held here never leave room unused. A client seen once,
 * or rarely, never holds a lease: each of its requests is one call.
 *
 * Hand-written: no library leases rate-limit capacity from a Durable Object.
 *
 * @example
 * const verdict = await leases.verdict(() => limiterOf(env, key), key, rule);
 */
export class RateLeases {
  readonly #clients = new Map<string, Client>();

  async verdict(limiter: () => RateLimiterApi, key: string, rule: RateRule): Promise<RateVerdict> {
    const now = Date.now();
    const id = `${rule.name} ${key}`;
    let client = this.#clients.get(id);
    if (!client) {
      client = { leases: [], returns: [], seen: 0, lastAsked: 0, asking: 0, askingSlots: 0, remaining: 0, resetAt: 0, decidedAt: 0 };
      this.#clients.set(id, client);
      if (this.#clients.size > MOST_CLIENTS) this.#clients.delete(this.#clients.keys().next().value!);
    }
    client.seen++;
    const lease = this.#spendable(client, now);
    const leader = client.asking === 0;
    const newest = client.leases.at(-1);
    const renew = leader && newest !== undefined && (unspent(client) <= newest.size / 4 || now >= newest.until - SPEND_WITHIN_MS / 4);
    if (lease && !renew) {
      lease.left--;
      return { allowed: true, remaining: client.remaining + heldSlots(client), resetAt: client.resetAt, now, audit: 0 };
    }
    // One call at a time asks for slots, as many as the client's pace spends in SPEND_WITHIN_MS;
    // requests meanwhile without a slot to spend are each decided alone.
    let wanted = 0;
    // Not when the window was last seen nearly full: the limiter would grant none.
    if (leader && client.remaining >= 4) {
      const elapsed = Math.max(1, now - client.lastAsked);
      if (elapsed < 10 * SPEND_WITHIN_MS) wanted = Math.min(MOST_SLOTS, Math.ceil(((client.seen - 1) * SPEND_WITHIN_MS) / elapsed));
      client.seen = 1;
      client.lastAsked = now;
    }
    // Most recently asking last: the client forgotten when too many are known is the one that asked longest ago.
    this.#clients.delete(id);
    this.#clients.set(id, client);
    // Holding slots, or waiting for a call that may bring some: a refusal may yet be admitted by a
    // slot, so the limiter neither counts nor audits it as one.
    const holding = unspent(client) > 0 || client.askingSlots > 0;
    const verdict = await this.#ask(client, limiter, rule, now, wanted, holding);
    if (verdict.allowed || !holding) return verdict;
    // Refused while holding (or about to hold) slots: a slot admits it (the limiter counted it already).
    const slot = this.#spendable(client, Date.now());
    if (slot) {
      slot.left--;
      return { allowed: true, remaining: client.remaining + heldSlots(client), resetAt: client.resetAt, now, audit: 0 };
    }
    // None left after all: refused like any other request, counted and audited as one.
    return this.#ask(client, limiter, rule, Date.now(), 0, false);
  }

  /** One call to the limiter, giving back the unspent slots of expired leases and keeping the slots it grants. */
  async #ask(client: Client, limiter: () => RateLimiterApi, rule: RateRule, now: number, wanted: number, holding: boolean) {
    const returns = client.returns;
    client.returns = [];
    const slots = wanted > 0 ? 1 : 0;
    client.asking++;
    client.askingSlots += slots;
    let verdict: RateVerdict;
    try {
      // Returns lost with a failed call stay counted: that only refuses more.
      verdict = await limiter().hit(rule.name, rule.calls, rule.periodSeconds * 1000, { lease: wanted, returned: returns, holding });
    } finally {
      client.asking--;
      client.askingSlots -= slots;
    }
    if (verdict.now >= client.decidedAt) {
      client.remaining = verdict.remaining;
      client.resetAt = verdict.resetAt;
      client.decidedAt = verdict.now;
    }
    if (verdict.lease)
      client.leases.push({ left: verdict.lease.slots, size: verdict.lease.slots, until: now + SPEND_WITHIN_MS, at: verdict.lease.at });
    return { ...verdict, remaining: verdict.remaining + heldSlots(client) };
  }

  /** The first lease with a slot to spend at `now`; expired ones are dropped, their unspent slots kept for giving back. */
  #spendable(client: Client, now: number): Lease | undefined {
    let found: Lease | undefined;
    client.leases = client.leases.filter((lease) => {
      if (now > lease.until) {
        if (lease.left > 0) client.returns.push({ at: lease.at, count: lease.left });
        return false;
      }
      if (lease.left === 0) return false;
      found ??= lease;
      return true;
    });
    return found;
  }
}

/** Slots of the client's live leases not spent yet. */
const unspent = (client: Client) => client.leases.reduce((sum, lease) => sum + lease.left, 0);
/** Slots the limiter counts for this isolate that it has not spent: its live leases' and those it is giving back. */
const heldSlots = (client: Client) => unspent(client) + client.returns.reduce((sum, given) => sum + given.count, 0);
