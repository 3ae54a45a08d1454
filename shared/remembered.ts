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
  const answers = new Map<string, T>();
  const answer = (key: string): T => {
    const known = answers.get(key);
    if (known !== undefined || answers.has(key)) return known as T;
    const found = work(key);
    if (key.length <= maxKeyLength) {
      if (answers.size >= max) answers.clear();
      answers.set(key, found);
    }
    return found;
  };
  return Object.assign(answer, { forget: () => answers.clear() });
}
