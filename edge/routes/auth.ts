import { createRoute } from "@hono/zod-openapi";
import {
  ApiKeyCreate,
  ApiKeyCreated,
  ApiKeyIdParam,
  ApiKeyList,
  ApiKey,
  FirstAdminRequest,
  LoginRequest,
  Ok,
  RegisterRequest,
  RegistrationSetting,
  SessionInfo,
  SetupStatus,
} from "../../shared/schemas/auth";
import { ErrorBody } from "../../shared/schemas/common";
import { User } from "../../shared/schemas/users";
import { auditLater } from "../audit/trail";
import { createApiKey, listApiKeys, revokeApiKey } from "../auth/api-keys";
import { createSession, deleteSession } from "../auth/sessions";
import { requireSetupToken } from "../auth/setup-token";
import { fromGenuineLoopback } from "../ratelimit/client-ip";
import { checkPassword, createFirstAdmin, createUser, needsSetup } from "../auth/users";
import { principalOf } from "../middleware/authorize";
import { loginFailureLimit, usernameDigest } from "../middleware/failure-limits";
import { ApiError } from "../errors";
import { createRouter } from "../router";
import { json, jsonBody } from "./openapi";
import { getSetting, setSetting } from "../settings-store";
import { clearSessionCookie, setSessionCookie } from "../auth/session-cookie";

export const auth = createRouter();

const tags = ["Authentication"];
const errors = {
  401: json(ErrorBody, "No valid credential"),
  403: json(ErrorBody, "Credential valid but not allowed"),
  422: json(ErrorBody, "Invalid request body"),
};

auth.openapi(
  createRoute({
    method: "get",
    path: "/api/cloud/auth/setup/status",
    tags,
    summary: "Whether the first admin still has to be created",
    description:
      "`needs_setup` is true until the first admin exists; `registration_enabled` says whether `POST /api/cloud/auth/register` is open.",
    responses: { 200: json(SetupStatus, "Setup status") },
  }),
  async (c) => {
    const db = c.get("db");
    return c.json({ needs_setup: await needsSetup(db), registration_enabled: await getSetting(db, "registration_enabled") }, 200);
  },
);

auth.openapi(
  createRoute({
    method: "post",
    path: "/api/cloud/auth/setup/first-admin",
    tags,
    summary: "Create the first admin (only while no user exists); logs them in",
    description:
      "From any machine but the service's own, `setup_token` must be the one-time setup token: the one `npm start` prints, or the SETUP_TOKEN variable (a Worker secret when deployed, where it is always needed).",
    request: jsonBody(FirstAdminRequest),
    responses: {
      201: json(SessionInfo, "The admin, logged in (Set-Cookie)"),
      403: json(ErrorBody, "No or a wrong setup token (setup_token_required, invalid_setup_token), or none configured (setup_token_unset)"),
      409: json(ErrorBody, "Setup already complete"),
      422: errors[422],
    },
  }),
  async (c) => {
    const db = c.get("db");
    const config = c.get("config");
    const { setup_token, ...input } = c.req.valid("json");
    requireSetupToken({
      environment: config.environment,
      expected: config.setupToken,
      fromLoopback: fromGenuineLoopback(c.req.raw.headers, config.rateLimit.trustedProxies),
      offered: setup_token,
    });
    const user = await createFirstAdmin(db, input);
    const session = await createSession(db, user.id, false);
    setSessionCookie(c, session.token, session.expiresAt);
    c.get("log").info("first admin created", { user_id: user.id, username: user.username });
    auditLater(c, { event_type: "first_admin_created", actor_user_id: user.id, actor: user.username, target: `user:${user.id}` });
    return c.json({ user, expires_at: session.expiresAt.toISOString() }, 201);
  },
);

auth.openapi(
  createRoute({
    method: "post",
    path: "/api/cloud/auth/login",
    tags,
    summary: "Log in with username (or email) and password; sets the session cookie",
    description:
      "The cookie is `st_session` over plain HTTP and `__Host-st_session` (Secure, Path=/, no Domain) over HTTPS; HttpOnly, SameSite=Lax, and lasts 24 hours (30 days with `remember_me`).",
    request: jsonBody(LoginRequest),
    responses: {
      200: json(SessionInfo, "Logged in (Set-Cookie)"),
      401: json(ErrorBody, "Wrong username or password"),
      422: errors[422],
      429: json(
        ErrorBody,
        "Too many attempts from this address (5 a minute), or too many failed logins for this username from this address (10 in 15 minutes, the right password from this address refused too; other addresses unaffected)",
      ),
    },
  }),
  async (c) => {
    const db = c.get("db");
    const { username, password, remember_me } = c.req.valid("json");
    const limit = await loginFailureLimit(c, username);
    await limit.admit();
    const user = await checkPassword(db, username, password);
    if (!user) {
      // The typed name only as a hash: it may be someone's password typed in the wrong field.
      const username_hash = await usernameDigest(username);
      c.get("log").warning("login failed", { username_hash });
      auditLater(c, { event_type: "login_failed", details: { reason: "wrong username or password", username_hash } });
      throw new ApiError(401, "invalid_credentials", "Wrong username or password");
    }
    await limit.succeeded();
    const session = await createSession(db, user.id, remember_me);
    setSessionCookie(c, session.token, session.expiresAt);
    c.get("log").info("login succeeded", { user_id: user.id });
    auditLater(c, { event_type: "login_succeeded", actor_user_id: user.id, actor: user.username, details: { remember_me } });
    return c.json({ user, expires_at: session.expiresAt.toISOString() }, 200);
  },
);

auth.openapi(
  createRoute({
    method: "post",
    path: "/api/cloud/auth/logout",
    tags,
    summary: "End the current session and clear its cookie",
    description:
      "Ends the session of the cookie sent (a session does not slide: it ends 24 hours after login, 30 days with `remember_me`, unless ended here) and clears the cookie. Audited as `logout`.",
    responses: { 200: json(Ok, "Logged out"), 401: errors[401] },
  }),
  async (c) => {
    const { sessionTokenHash } = principalOf(c);
    if (sessionTokenHash) await deleteSession(c.get("db"), sessionTokenHash);
    clearSessionCookie(c);
    auditLater(c, { event_type: "logout" });
    return c.json({ success: true as const }, 200);
  },
);

auth.openapi(
  createRoute({
    method: "post",
    path: "/api/cloud/auth/register",
    tags,
    summary: "Public self-registration as a researcher, when an admin has enabled it",
    description:
      "Off by default: 403 `registration_disabled` until an admin opens it with `PUT /api/cloud/auth/registration`. The new account gets the `researcher` level and logs in next. At most 3 per minute per address (rule `register`). Audited as `user_created`.",
    request: jsonBody(RegisterRequest),
    responses: {
      201: json(User, "Registered; log in next"),
      403: json(ErrorBody, "Registration is disabled"),
      409: json(ErrorBody, "Username or email taken"),
      422: errors[422],
    },
  }),
  async (c) => {
    const db = c.get("db");
    if (!(await getSetting(db, "registration_enabled"))) {
      throw new ApiError(403, "registration_disabled", "Public registration is disabled; ask an admin to create your account");
    }
    const user = await createUser(db, c.req.valid("json"), ["researcher"]);
    c.get("log").info("user registered", { user_id: user.id });
    auditLater(c, {
      event_type: "user_created",
      actor_user_id: user.id,
      actor: user.username,
      target: `user:${user.id}`,
      details: { via: "registration", levels: user.levels },
    });
    return c.json(user, 201);
  },
);

auth.openapi(
  createRoute({
    method: "put",
    path: "/api/cloud/auth/registration",
    tags,
    summary: "Enable or disable public registration (admin)",
    description:
      '`{"enabled": true}` lets anyone who reaches the service create a researcher account with `POST /api/cloud/auth/register`; `false` closes it again.',
    request: jsonBody(RegistrationSetting),
    responses: { 200: json(RegistrationSetting, "Saved"), ...errors },
  }),
  async (c) => {
    const { enabled } = c.req.valid("json");
    await setSetting(c.get("db"), "registration_enabled", enabled);
    c.get("log").info("registration setting changed", { enabled, by: principalOf(c).user.id });
    return c.json({ enabled }, 200);
  },
);

auth.openapi(
  createRoute({
    method: "post",
    path: "/api/cloud/auth/api-keys",
    tags,
    summary: "Create an API key (needs a session); the key is shown only in this answer",
    description:
      "Only with a session cookie from the service's own origin: an API key cannot mint more keys (403 `session_required`). The key is `st_` and 43 random characters; only its SHA-256 is stored, so this answer is the only time it is shown. `expires_in_days` makes it expire. At most 10 per minute per address (rule `api-keys`). Audited as `api_key_created` (never the key).",
    request: jsonBody(ApiKeyCreate),
    responses: { 201: json(ApiKeyCreated, "The new key"), ...errors },
  }),
  async (c) => {
    const { name, expires_in_days } = c.req.valid("json");
    const { user } = principalOf(c);
    const created = await createApiKey(c.get("db"), user.id, name, expires_in_days);
    c.get("log").info("API key created", { user_id: user.id, key_id: created.id, prefix: created.prefix });
    auditLater(c, {
      event_type: "api_key_created",
      target: `api_key:${created.id}`,
      details: { name, prefix: created.prefix, expires_at: created.expires_at },
    });
    return c.json(created, 201);
  },
);

auth.openapi(
  createRoute({
    method: "get",
    path: "/api/cloud/auth/api-keys",
    tags,
    summary: "List your API keys (never their secrets)",
    description:
      "Your own keys with `prefix` (the key's first 11 characters, by which it is found), expiry and `last_used_at` (updated at most once a minute).",
    responses: { 200: json(ApiKeyList, "Your keys, newest first"), 401: errors[401] },
  }),
  async (c) => c.json({ keys: await listApiKeys(c.get("db"), principalOf(c).user.id) }, 200),
);

auth.openapi(
  createRoute({
    method: "delete",
    path: "/api/cloud/auth/api-keys/{key_id}",
    tags,
    summary: "Revoke an API key (your own; admins any)",
    description:
      "Refused from the next request on by the Worker instance that revoked it, and within 2 seconds by every other (an instance remembers a key it verified for 2 s). Another user's key is 404, except for admins. Audited as `api_key_revoked`.",
    request: { params: ApiKeyIdParam },
    responses: { 200: json(ApiKey, "The revoked key"), 404: json(ErrorBody, "No such key of yours"), ...errors },
  }),
  async (c) => {
    const { user } = principalOf(c);
    const key = await revokeApiKey(c.get("db"), c.req.valid("param").key_id, user.id, user.level === "admin");
    c.get("log").info("API key revoked", { key_id: key.id, by: user.id });
    auditLater(c, { event_type: "api_key_revoked", target: `api_key:${key.id}`, details: { name: key.name, prefix: key.prefix } });
    return c.json(key, 200);
  },
);
