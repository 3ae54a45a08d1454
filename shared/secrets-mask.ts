/*
 * Secret-looking options are never shown back (ARCHITECTURE "Trust model"): every response and
 * export carries MASK in their place, for every level. A key is secret-looking when its name
 * contains one of SECRET_KEY_PARTS, at any depth, including inside an option whose value is a
 * string holding JSON (`--webhook_config`). Sending MASK back means "keep what is stored".
 */

/** What a secret's value is replaced with. */
export const MASK = "********";

/** A key whose lower-cased name contains one of these holds a secret. */
export const SECRET_KEY_PARTS = ["secret", "token", "password", "api_key", "auth"] as const;

/**
 * True when a key (an option name or a JSON property) names a secret.
 *
 * @example
 * isSecretKey("signing_secret"); // true
 */
export function isSecretKey(key: string): boolean {
  const lower = key.toLowerCase();
  return SECRET_KEY_PARTS.some((part) => lower.includes(part));
}

const isContainer = (v: unknown): v is Record<string, unknown> | unknown[] => typeof v === "object" && v !== null;

/** A string holding a JSON object or array, parsed; else undefined. */
function parsedJson(text: string): Record<string, unknown> | unknown[] | undefined {
  const start = text.trimStart()[0];
  if (start !== "{" && start !== "[") return undefined;
  try {
    const parsed: unknown = JSON.parse(text);
    return isContainer(parsed) ? parsed : undefined;
  } catch {
    return undefined;
  }
}

function maskValue(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(maskValue);
  if (isContainer(value))
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, isSecretKey(k) && v !== null && v !== "" ? MASK : maskValue(v)]));
  if (typeof value === "string") {
    const inner = parsedJson(value);
    if (inner !== undefined) {
      const masked = maskValue(inner);
      // Re-serialised only when something changed, so a value without secrets reads as stored.
      return JSON.stringify(masked) === JSON.stringify(inner) ? value : JSON.stringify(masked);
    }
  }
  return value;
}

/**
 * A copy of an option map (or any JSON value) with every secret-looking key's value replaced by
 * MASK, at any depth, inside JSON strings too. Null and empty values stay as they are: there is
 * nothing to hide, and a client can tell "unset" from "set".
 *
 * @example
 * maskSecrets({ "--hub_token": "hf_x", "--webhook_config": '[{"callback_url":"https://h","signing_secret":"s"}]' });
 * // { "--hub_token": "********", "--webhook_config": '[{"callback_url":"https://h","signing_secret":"********"}]' }
 */
export function maskSecrets<T>(value: T): T {
  return maskValue(value) as T;
}

/** Where a MASK was sent back with nothing stored at that place to keep. */
export class MaskWithoutValue extends Error {
  constructor(readonly path: string) {
    super(`${path} is the mask "${MASK}" but nothing is stored there to keep; send the real value`);
  }
}

function keepValue(incoming: unknown, stored: unknown, path: string): unknown {
  if (incoming === MASK) {
    if (stored === undefined || stored === MASK) throw new MaskWithoutValue(path);
    return stored;
  }
  if (Array.isArray(incoming)) return incoming.map((v, i) => keepValue(v, Array.isArray(stored) ? stored[i] : undefined, `${path}[${i}]`));
  if (isContainer(incoming)) {
    const from = isContainer(stored) && !Array.isArray(stored) ? (stored as Record<string, unknown>) : {};
    return Object.fromEntries(Object.entries(incoming).map(([k, v]) => [k, keepValue(v, from[k], `${path}.${k}`)]));
  }
  if (typeof incoming === "string" && incoming.includes(MASK)) {
    const inner = parsedJson(incoming);
    if (inner !== undefined) return JSON.stringify(keepValue(inner, typeof stored === "string" ? parsedJson(stored) : undefined, path));
  }
  return incoming;
}

/**
 * The incoming option map with every MASK replaced by the stored value at the same key path
 * (inside JSON strings such as `--webhook_config` too), so a client can send back what it was
 * shown without erasing the secrets. Throws MaskWithoutValue (with the path) where a MASK has
 * nothing stored to stand for.
 *
 * @example
 * keepMaskedSecrets({ "--hub_token": "********" }, { "--hub_token": "hf_x" }); // { "--hub_token": "hf_x" }
 */
export function keepMaskedSecrets<T extends Record<string, unknown>>(incoming: T, stored: Record<string, unknown> | null | undefined): T {
  return Object.fromEntries(Object.entries(incoming).map(([k, v]) => [k, keepValue(v, stored?.[k], k)])) as T;
}
