import type { AppEnv } from "./app-env";
import { authorize } from "./middleware/authorize";
import { drainUnreadBodies, requestBodyLimits } from "./middleware/body-limit";
import { requestContext } from "./middleware/request-context";
import { createRouter, handleError, handleNotFound } from "./router";
import { auth } from "./routes/auth";
import { docsRoutes } from "./routes/docs";
import { environments } from "./routes/environments";
import { health } from "./routes/health";
import { queue } from "./routes/queue";
import { system } from "./routes/system";
import { runsRoutes } from "./routes/runs";
import { users } from "./routes/users";
import { workersRoutes } from "./routes/workers";
import { training } from "./routes/training";
import { webhooksRoutes } from "./routes/webhooks";
import { notificationsRoutes } from "./routes/notifications";
import { datasetsRoutes } from "./routes/datasets";
import { httpMetrics } from "./middleware/http-metrics";
import { rateLimit } from "./middleware/rate-limit";
import { securityHeaders } from "./middleware/security-headers";
import { metricsRoutes } from "./routes/metrics";
import { auditRoutes } from "./routes/audit";
import { providersRoutes } from "./routes/providers";
import { cloudRoutes } from "./routes/cloud";
import { spendRoutes } from "./routes/spend";
import { storageConventions, storageRoutes } from "./routes/storage";
import { uiRoutes } from "./routes/ui";
import { websocketOrigin } from "./middleware/websocket-origin";
import { frontOnly } from "./middleware/front-only";
import { idempotentSubmits } from "./middleware/idempotency";

/**
 * The whole HTTP API: context and authorisation for every request, then one router per area.
 *
 * @example
 * export default { fetch: createApp().fetch };
 */
export function createApp() {
  const app = createRouter();
  // Outermost: whatever answers a request without reading its body, its answer still arrives.
  app.use("*", drainUnreadBodies());
  // Locally, only the client front reaches workerd (it sets the client's address).
  app.use("*", frontOnly());
  // First, before anything that can fail or refuse: a storage request's errors are S3 errors.
  app.use("*", storageConventions());
  app.use("*", requestContext());
  app.use("*", websocketOrigin());
  app.use("*", securityHeaders());
  app.use("*", httpMetrics());
  app.use("*", rateLimit());
  app.use("*", authorize());
  app.use("*", requestBodyLimits());
  app.use("*", idempotentSubmits());
  app.route("/", health);
  app.route("/", auth);
  app.route("/", users);
  app.route("/", environments);
  app.route("/", queue);
  app.route("/", system);
  app.route("/", workersRoutes);
  app.route("/", training);
  app.route("/", runsRoutes);
  app.route("/", webhooksRoutes);
  app.route("/", notificationsRoutes);
  app.route("/", datasetsRoutes);
  app.route("/", metricsRoutes);
  app.route("/", auditRoutes);
  app.route("/", providersRoutes);
  app.route("/", cloudRoutes);
  app.route("/", spendRoutes);
  app.route("/", storageRoutes);
  app.route("/", uiRoutes);
  app.route("/", docsRoutes(app));
  app.notFound(handleNotFound);
  app.onError(handleError);
  return app;
}

export type App = ReturnType<typeof createApp>;
export type { AppEnv };
