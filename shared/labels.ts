/** True when `value` matches `pattern`, where `*` stands for any run of characters (none too). */
export function globMatch(pattern: string, value: string): boolean {
  const parts = pattern.split("*");
  if (parts.length === 1) return pattern === value;
  const first = parts[0]!;
  const last = parts[parts.length - 1]!;
  if (!value.startsWith(first) || value.length < first.length + last.length || !value.endsWith(last)) return false;
  let at = first.length;
  const end = value.length - last.length;
  for (const middle of parts.slice(1, -1)) {
    const found = value.indexOf(middle, at);
    if (found < 0 || found + middle.length > end) return false;
    at = found + middle.length;
  }
  return true;
}

/**
 * True when a worker's labels satisfy every requirement: each required key is present and its
 * value matches the requirement's glob.
 *
 * @example
 * matchesLabels({ gpu: "a100*", zone: "eu-*" }, { gpu: "a100-80gb", zone: "eu-west" }) // true
 */
export function matchesLabels(required: Record<string, string> | null | undefined, labels: Record<string, string>): boolean {
  if (!required) return true;
  return Object.entries(required).every(([key, pattern]) => Object.hasOwn(labels, key) && globMatch(pattern, labels[key]!));
}
