import { createRoute } from "@hono/zod-openapi";
import { UserIdParam, UserStallPolicy, UserStallPolicyUpdate } from "../../shared/schemas/queue";
import { setUserStallPolicy, userStallPolicy } from "../jobs/stall-policy";
import { Me, User, UserCreate, UserList } from "../../shared/schemas/users";
import { auditLater } from "../audit/trail";
import { createUser, listUsers } from "../auth/users";
import { principalOf } from "../middleware/authorize";
import { createRouter } from "../router";
import { error, json } from "./openapi";

export const users = createRouter();

const tags = ["Users"];

users.openapi(
  createRoute({
    method: "get",
    path: "/api/users/me",
    tags,
    summary: "The calling user, with levels and how they authenticated",
    description:
      "Your user, the levels you hold (the highest decides) and whether this request came with a session or an API key. Never rate limited.",
    responses: { 200: { description: "You", content: { "application/json": { schema: Me } } }, 401: error("No valid credential") },
  }),
  (c) => {
    const { user, via } = principalOf(c);
    return c.json({ ...user, auth_method: via }, 200);
  },
);

users.openapi(
  createRoute({
    method: "get",
    path: "/api/users",
    tags,
    summary: "List users (admin)",
    description: "Every user with their levels.",
    responses: {
      200: { description: "All users", content: { "application/json": { schema: UserList } } },
      401: error("No valid credential"),
      403: error("Not an admin"),
    },
  }),
  async (c) => c.json({ users: await listUsers(c.get("db")) }, 200),
);

users.openapi(
  createRoute({
    method: "post",
    path: "/api/users",
    tags,
    summary: "Create a user with levels (admin)",
    description:
      "`level_names` from admin, lead, researcher, viewer; `team_id` puts the user in a team for the queue's fair-share limit. The password is at least 8 characters. 409 when the username or email is taken. Audited as `user_created`.",
    request: { body: { required: true, content: { "application/json": { schema: UserCreate } } } },
    responses: {
      201: { description: "Created", content: { "application/json": { schema: User } } },
      401: error("No valid credential"),
      403: error("Not an admin"),
      409: error("Username or email taken"),
      422: error("Invalid request body"),
    },
  }),
  async (c) => {
    const { level_names, ...input } = c.req.valid("json");
    const user = await createUser(c.get("db"), input, level_names);
    c.get("log").info("user created", { user_id: user.id, levels: user.levels, by: principalOf(c).user.id });
    auditLater(c, {
      event_type: "user_created",
      target: `user:${user.id}`,
      details: { username: user.username, levels: user.levels, via: "admin" },
    });
    return c.json(user, 201);
  },
);

users.openapi(
  createRoute({
    method: "get",
    path: "/api/users/{user_id}/stall-policy",
    tags,
    summary: "A user's policy for their stalled jobs",
    description:
      "`policy`: the user's own choice (null: none, the service's default applies); `effective`: what happens to their jobs when one is marked stalled (see StallPolicy and GET /api/admin/stall-detection). Your own; an admin anyone's (others: 403).",
    request: { params: UserIdParam },
    responses: {
      200: json(UserStallPolicy, "The policy"),
      401: error("No valid credential"),
      403: error("Another user's, and not an admin"),
      404: error("No such user"),
    },
  }),
  async (c) => c.json(await userStallPolicy(c.get("db"), principalOf(c).user, c.req.valid("param").user_id), 200),
);

users.openapi(
  createRoute({
    method: "put",
    path: "/api/users/{user_id}/stall-policy",
    tags,
    summary: "Set a user's policy for their stalled jobs",
    description:
      "`notify`, `stop_and_requeue` or `fail`; null goes back to the service's default. Applies to their jobs marked stalled from now on. Your own; an admin anyone's (others: 403, nothing changed). Audited as `stall_policy_changed`.",
    request: { params: UserIdParam, body: { required: true, content: { "application/json": { schema: UserStallPolicyUpdate } } } },
    responses: {
      200: json(UserStallPolicy, "The policy now"),
      401: error("No valid credential"),
      403: error("Another user's, and not an admin"),
      404: error("No such user"),
      422: error("Not a policy"),
    },
  }),
  async (c) => {
    const userId = c.req.valid("param").user_id;
    const answer = await setUserStallPolicy(c.get("db"), principalOf(c).user, userId, c.req.valid("json").policy);
    auditLater(c, { event_type: "stall_policy_changed", target: `user:${userId}`, details: { policy: answer.policy } });
    return c.json(answer, 200);
  },
);
