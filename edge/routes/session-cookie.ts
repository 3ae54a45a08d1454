import type { Context } from "hono";
import { deleteCookie, setCookie } from "hono/cookie";
import type { AppEnv } from "../app-env";
import { SESSION_COOKIE } from "../auth/sessions";

// Secure whenever the service is reached over HTTPS, directly or at its public URL.
function isHttps(c: Context<AppEnv>): boolean {
  return new URL(c.req.url).protocol === "https:" || c.get("config").publicUrl?.protocol === "https:";
}

export function setSessionCookie(c: Context<AppEnv>, token: string, expires: Date): void {
  setCookie(c, SESSION_COOKIE, token, { httpOnly: true, sameSite: "Lax", secure: isHttps(c), path: "/", expires });
}

export function clearSessionCookie(c: Context<AppEnv>): void {
  deleteCookie(c, SESSION_COOKIE, { httpOnly: true, sameSite: "Lax", secure: isHttps(c), path: "/" });
}
