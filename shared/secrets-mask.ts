/*
 * Secret-looking options are never shown back unasked (README "Security in short"): every
 * response and export carries MASK in their place, for every level. A key is secret-looking when
 * one of its words names a secret (isSecretKey), at any depth, including inside an option whose
 * value is a string holding JSON (`--webhook_config`). A URL anywhere in a value loses its user
 * info and the values of its secret-looking query parameters (`https://********@host/?token=********`).
 * Sending back what was shown means "keep what is stored".
 */

/** What a secret's value is replaced with. */
export const MASK = "********";

/**
 * Words that name a secret wherever they stand in a key: `--wandb_key`, `x-api-key`,
 * `--credentials`, `db_pass`, `Set-Cookie`, `sig` (a presigned URL's signature).
 */
export const SECRET_WORDS: ReadonlySet<string> = new Set([
  "key",
  "keys",
  "pass",
  "creds",
  "authorization",
  "bearer",
  "cookie",
  "cookies",
  "dsn",
  "signature",
  "sig",
]);

/** A word containing one of these names a secret: `--client_secret`, `dbpassword`, `--private_key_passphrase`, `apikey`. */
export const SECRET_WORD_PARTS = ["secret", "password", "passwd", "passphrase", "credential", "apikey", "privatekey", "accesskey"] as const;

/**
 * A word ending in one of these names a secret: `--hub_token`, `githubtoken`, `oauth`. Only the
 * ending, so `--tokenizer_max_length` and `--author` stay readable.
 */
export const SECRET_WORD_ENDINGS = ["token", "auth"] as const;

// A webhook's address carries its credential (Discord's and Slack's are the token itself):
// `webhook_url`, `discord_webhook`, `webhookUrl`. Not `--webhook_config` or
// `--webhook_reporting_interval`, whose secrets are masked inside.
const WEBHOOK_ADDRESS_WORDS = new Set(["url", "uri", "link"]);

/** The lower-cased words of a key: split at anything not a letter or digit, and where a lower-case letter or digit meets an upper-case one. */
const wordsOf = (key: string): string[] =>
  key
    .replace(/([a-z0-9])([A-Z])/g, "$1 $2")
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter(Boolean);

/**
 * True when a key (an option name, a JSON property or a URL's query parameter) names a secret:
 * one of its words is in SECRET_WORDS, contains one of SECRET_WORD_PARTS or ends in one of
 * SECRET_WORD_ENDINGS, or it names a webhook's address.
 *
 * @example
 * isSecretKey("--wandb_key"); // true
 * isSecretKey("--tokenizer_max_length"); // false
 */
export function isSecretKey(key: string): boolean {
  const words = wordsOf(key);
  return words.some(
    (word, i) =>
      SECRET_WORDS.has(word) ||
      SECRET_WORD_PARTS.some((part) => word.includes(part)) ||
      SECRET_WORD_ENDINGS.some((ending) => word.endsWith(ending)) ||
      word.endsWith("webhookurl") ||
      (word.endsWith("webhook") && (i === words.length - 1 || WEBHOOK_ADDRESS_WORDS.has(words[i + 1]!))),
  );
}

// A URL's user info, wherever it stands in text: everything between `://` and the authority's
// last `@` (a password may hold an unencoded `@`). The scheme is bounded (32 characters), so at
// most 32 starts scan each authority and a long value costs linear time.
const USER_INFO = /([a-z][a-z0-9+.-]{0,31}:\/\/)[^\s/?#"'<>`]*@/gi;
// A URL as it stands in text: a scheme, `://`, and everything up to a space, a quote or the next URL.
const URL_IN_TEXT = /[a-z][a-z0-9+.-]{0,31}:\/\/(?:(?![a-z][a-z0-9+.-]{0,31}:\/\/)[^\s"'<>`])+/gi;

function queryParameterName(name: string): string {
  try {
    return decodeURIComponent(name.replace(/\+/g, " "));
  } catch {
    return name;
  }
}

/** A URL with the values of its secret-looking query parameters masked. */
function maskQuery(url: string): string {
  const query = url.indexOf("?");
  if (query < 0) return url;
  const fragment = url.indexOf("#", query);
  const end = fragment < 0 ? url.length : fragment;
  const parameters = url
    .slice(query + 1, end)
    .split("&")
    .map((parameter) => {
      const equals = parameter.indexOf("=");
      if (equals < 0 || equals === parameter.length - 1) return parameter;
      const name = parameter.slice(0, equals);
      return isSecretKey(queryParameterName(name)) ? `${name}=${MASK}` : parameter;
    });
  return `${url.slice(0, query + 1)}${parameters.join("&")}${url.slice(end)}`;
}

/**
 * Text with the credentials of every URL in it masked: the user info (`user:password@`, or a
 * token alone before the `@`) and the values of secret-looking query parameters. The rest stays
 * as written, so a reader still sees where it points.
 *
 * @example
 * maskUrlsIn("https://alice:hunter2@db.example.com:5432/x?sslmode=require&token=t0k");
 * // "https://********@db.example.com:5432/x?sslmode=require&token=********"
 */
export function maskUrlsIn(text: string): string {
  if (!text.includes("://")) return text;
  return text.replace(USER_INFO, `$1${MASK}@`).replace(URL_IN_TEXT, maskQuery);
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
    return maskUrlsIn(value);
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
  constructor(
    readonly path: string,
    message = `${path} is the mask "${MASK}" but nothing is stored there to keep; send the real value`,
  ) {
    super(message);
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
    // A URL shown with its credentials masked stands for the stored one only as it was shown:
    // an edited one needs its credentials again.
    if ((incoming.match(URL_IN_TEXT) ?? []).some((url) => url.includes(MASK))) {
      if (typeof stored === "string" && maskUrlsIn(stored) === incoming) return stored;
      throw new MaskWithoutValue(
        path,
        `${path} holds a URL with masked credentials ("${MASK}") that is not the stored URL as shown; send its credentials again`,
      );
    }
  }
  return incoming;
}

/**
 * The incoming option map (or list, such as a dataloader) with every MASK replaced by the stored
 * value at the same key path (inside JSON strings such as `--webhook_config` too, and a URL shown
 * with its credentials masked by the stored URL), so a client can send back what it was shown
 * without erasing the secrets. Throws MaskWithoutValue (with the path) where a MASK has nothing
 * stored to stand for.
 *
 * @example
 * keepMaskedSecrets({ "--hub_token": "********" }, { "--hub_token": "hf_x" }); // { "--hub_token": "hf_x" }
 */
export function keepMaskedSecrets<T extends Record<string, unknown> | unknown[]>(incoming: T, stored: unknown): T {
  if (Array.isArray(incoming)) return keepValue(incoming, stored, "") as T;
  const from = isContainer(stored) && !Array.isArray(stored) ? (stored as Record<string, unknown>) : {};
  return Object.fromEntries(Object.entries(incoming).map(([k, v]) => [k, keepValue(v, from[k], k)])) as T;
}
