import type { Context } from "hono";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import type { AppEnv } from "../app-env";
import { SESSION_COOKIE } from "./sessions";

// HTTPS when the request came over it, or when SERVICE_PUBLIC_URL says the service is reached
// over it (a TLS-terminating proxy in front of npm start). X-Forwarded-Proto is not consulted:
// set SERVICE_PUBLIC_URL instead.
function isHttps(c: Context<AppEnv>): boolean {
  return new URL(c.req.url).protocol === "https:" || c.get("config").publicUrl?.protocol === "https:";
}

// Over HTTPS the cookie is `__Host-st_session`: the browser keeps it only if it is Secure, has
// Path=/ and no Domain, so neither plain HTTP nor a sibling subdomain can plant or overwrite it.
const prefixFor = (c: Context<AppEnv>) => (isHttps(c) ? ({ prefix: "host" } as const) : {});

/** Sets the session cookie: `__Host-st_session` over HTTPS, `st_session` over plain HTTP. */
export function setSessionCookie(c: Context<AppEnv>, token: string, expires: Date): void {
  setCookie(c, SESSION_COOKIE, token, { httpOnly: true, sameSite: "Lax", secure: isHttps(c), path: "/", expires, ...prefixFor(c) });
}

/** Clears the session cookie this request's scheme uses. */
export function clearSessionCookie(c: Context<AppEnv>): void {
  deleteCookie(c, SESSION_COOKIE, { httpOnly: true, sameSite: "Lax", secure: isHttps(c), path: "/", ...prefixFor(c) });
}

/**
 * The session token the request carries, from the cookie its scheme uses: over HTTPS only
 * `__Host-st_session` counts (a plain `st_session` could have been planted), over HTTP only
 * `st_session`.
 *
 * @example
 * const token = readSessionCookie(c); // undefined when there is none
 */
export function readSessionCookie(c: Context<AppEnv>): string | undefined {
  return isHttps(c) ? getCookie(c, SESSION_COOKIE, "host") : getCookie(c, SESSION_COOKIE);
}
