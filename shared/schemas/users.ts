import { z } from "@hono/zod-openapi";
import { LEVELS } from "../levels";
import { Timestamp } from "./common";

export const Username = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{2,63}$/, "3 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit")
  .openapi({ example: "alice" });
export const Email = z.email().max(254).openapi({ example: "alice@example.com" });
export const Password = z
  .string()
  .min(8, "at least 8 characters")
  .max(1024, "at most 1024 characters")
  .openapi({ format: "password", example: "correct horse battery" });
export const TeamId = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/, "1 to 64 letters, digits, '.', '_' or '-'")
  .openapi({ description: "Team, for fair share between teams", example: "vision" });
export const LevelName = z.enum(LEVELS).openapi({ description: "User level: viewer, researcher, lead or admin" });

export const User = z
  .object({
    id: z.number().int(),
    username: z.string(),
    email: z.string(),
    levels: z.array(LevelName),
    level: LevelName.nullable().openapi({ description: "The highest level held; it decides permissions" }),
    priority: z.number().int().openapi({ description: "Queue priority given by the level (viewer 0, researcher 10, lead 20, admin 30)" }),
    team_id: z.string().nullable().openapi({ description: "The team whose fair-share limit the user's jobs count against" }),
    created_at: Timestamp,
  })
  .openapi("User");
export type User = z.infer<typeof User>;

export const UserCreate = z
  .strictObject({
    email: Email,
    username: Username,
    password: Password,
    level_names: z
      .array(LevelName)
      .min(1)
      .default(["researcher"])
      .openapi({ example: ["researcher"] }),
    team_id: TeamId.optional(),
  })
  .openapi("UserCreate", {
    example: { email: "bea@example.com", username: "bea", password: "another long one", level_names: ["researcher"] },
  });

export const UserList = z.object({ users: z.array(User) }).openapi("UserList");

export const Me = User.extend({
  auth_method: z.enum(["session", "api_key"]).openapi({ description: "How this request was authenticated" }),
}).openapi("Me");
