import { z } from "@hono/zod-openapi";
import { Timestamp } from "./common";
import { Email, Password, User, Username } from "./users";

export const SetupStatus = z
  .object({
    needs_setup: z.boolean().openapi({ description: "True until the first admin exists" }),
    registration_enabled: z.boolean(),
  })
  .openapi("SetupStatus");

export const FirstAdminRequest = z
  .strictObject({
    email: Email,
    username: Username,
    password: Password,
    setup_token: z.string().max(256).optional().openapi({
      description:
        "The one-time setup token: needed unless the request comes from the service's own machine (npm start prints it; deployed, the SETUP_TOKEN secret)",
    }),
  })
  .openapi("FirstAdminRequest", { example: { email: "admin@example.com", username: "admin", password: "correct horse battery" } });

export const RegisterRequest = z
  .strictObject({ email: Email, username: Username, password: Password })
  .openapi("RegisterRequest", { example: { email: "bea@example.com", username: "bea", password: "another long one" } });

export const LoginRequest = z
  .strictObject({
    username: z.string().min(1).max(254).openapi({ description: "Username or email", example: "alice" }),
    password: z.string().min(1).max(1024),
    remember_me: z.boolean().default(false).openapi({ description: "30-day session instead of 24 hours" }),
  })
  .openapi("LoginRequest", { example: { username: "admin", password: "correct horse battery", remember_me: false } });

export const SessionInfo = z.object({ user: User, expires_at: Timestamp }).openapi("SessionInfo");

export const RegistrationSetting = z.strictObject({ enabled: z.boolean() }).openapi("RegistrationSetting", { example: { enabled: true } });

export const ApiKeyCreate = z
  .strictObject({
    name: z.string().trim().min(1).max(100).openapi({ example: "laptop" }),
    expires_in_days: z.number().int().min(1).max(3650).optional().openapi({ description: "Omit for a key that never expires" }),
  })
  .openapi("ApiKeyCreate");

export const ApiKey = z
  .object({
    id: z.number().int(),
    name: z.string(),
    prefix: z.string().openapi({ description: "The key's first characters, to recognise it", example: "st_Ab3dE9xQ" }),
    created_at: Timestamp,
    expires_at: Timestamp.nullable(),
    last_used_at: Timestamp.nullable().openapi({ description: "Updated at most once a minute" }),
    revoked_at: Timestamp.nullable(),
  })
  .openapi("ApiKey");
export type ApiKey = z.infer<typeof ApiKey>;

export const ApiKeyCreated = ApiKey.extend({
  key: z.string().openapi({ description: "The whole key. Shown only in this answer; store it now.", example: "st_Ab3dE9xQ…" }),
}).openapi("ApiKeyCreated");

/** The key of DELETE /api/cloud/auth/api-keys/{key_id}. */
export const ApiKeyIdParam = z.object({
  key_id: z.coerce
    .number()
    .int()
    .positive()
    .openapi({ param: { name: "key_id", in: "path" }, example: 3 }),
});

export const ApiKeyList = z.object({ keys: z.array(ApiKey) }).openapi("ApiKeyList");

export const Ok = z.object({ success: z.literal(true) }).openapi("Ok");
