/**
 * A Map of at most `max` entries that forgets them all when a new key would pass that: for what an
 * isolate keeps between requests (a verified key, a budget hint, an event log's state, a memo
 * below), so that no client can grow it without bound. Clearing rather than evicting one by one:
 * the callers keep a few hot entries, which come back at their next use.
 *
 * @example
 * const seen = new BoundedMap<string, number>(1000);
 * seen.set("a", 1);
 */
export class BoundedMap<K, V> extends Map<K, V> {
  constructor(private readonly max: number) {
    super();
  }

  override set(key: K, value: V): this {
    if (this.size >= this.max && !this.has(key)) this.clear();
    return super.set(key, value);
  }
}

/**
 * A pure function's answers remembered by their key, for work every request repeats on a few
 * inputs (a client's address, a request's rate rule, a route's match). Bounded: at most `max`
 * answers, all forgotten when full; a key longer than `maxKeyLength` is worked out each time and
 * never kept, so what a client sends cannot grow it. `forget()` drops every answer (the function's
 * inputs changed).
 *
 * @example
 * const parsed = remembered((text) => parse(text), { maxKeyLength: 64 });
 * parsed("127.0.0.1"); // parsed once, then answered from memory
 */
export function remembered<T>(
  work: (key: string) => T,
  { max = 4096, maxKeyLength }: { max?: number; maxKeyLength: number },
): ((key: string) => T) & { forget(): void } {
  const answers = new BoundedMap<string, T>(max);
  const answer = (key: string): T => {
    const known = answers.get(key);
    if (known !== undefined || answers.has(key)) return known as T;
    const found = work(key);
    if (key.length <= maxKeyLength) answers.set(key, found);
    return found;
  };
  return Object.assign(answer, { forget: () => answers.clear() });
}
