import { base64url, constantTimeEqual, fromBase64url } from "./crypto";

/** Production Workers refuse PBKDF2 above 100,000 iterations; local workerd does not check. */
export const PBKDF2_ITERATIONS = 100_000;
const SALT_BYTES = 16;
const HASH_BYTES = 32;
const SCHEME = "pbkdf2-sha256";

async function derive(password: string, salt: Uint8Array<ArrayBuffer>, iterations: number): Promise<Uint8Array> {
  const key = await crypto.subtle.importKey("raw", new TextEncoder().encode(password), "PBKDF2", false, ["deriveBits"]);
  const bits = await crypto.subtle.deriveBits({ name: "PBKDF2", hash: "SHA-256", salt, iterations }, key, HASH_BYTES * 8);
  return new Uint8Array(bits);
}

/**
 * Hashes a password with PBKDF2-SHA256 and a per-user salt, storing the parameters with it so
 * the count can change later without breaking existing users.
 *
 * @example
 * await hashPassword("hunter22") // "pbkdf2-sha256$100000$<salt>$<hash>"
 */
export async function hashPassword(password: string): Promise<string> {
  const salt = crypto.getRandomValues(new Uint8Array(SALT_BYTES));
  const hash = await derive(password, salt, PBKDF2_ITERATIONS);
  return `${SCHEME}$${PBKDF2_ITERATIONS}$${base64url(salt)}$${base64url(hash)}`;
}

/** True when `password` matches `stored`; false for any malformed or foreign hash. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, iterationsText, saltText, hashText] = stored.split("$");
  const iterations = Number(iterationsText);
  if (scheme !== SCHEME || !saltText || !hashText || !Number.isInteger(iterations) || iterations < 1 || iterations > PBKDF2_ITERATIONS) {
    return false;
  }
  const expected = fromBase64url(hashText);
  const actual = await derive(password, fromBase64url(saltText), iterations);
  return constantTimeEqual(actual, expected);
}

// Verifying against this when the user does not exist keeps a failed login's timing the same
// whether or not the username is known.
// Only the string is cached: a promise shared across requests trips workerd's request isolation.
let decoy: string | undefined;
export async function burnPasswordCheck(password: string): Promise<void> {
  decoy ??= await hashPassword("decoy password that matches nothing");
  await verifyPassword(password, decoy);
}
