import { createApp } from "./app";
import type { Env } from "./env";
import { hostCall } from "./host-call";

// The Durable Object classes of edge/durable-objects.ts, exactly (test/local/durable-objects.test.ts).
export { Scheduler } from "./scheduler/scheduler";
export { EventsHub } from "./jobs/hub";
export { WorkerChannel } from "./workers/channel";
export { RateLimiter } from "./ratelimit/limiter";
export { MetricsCollector } from "./metrics/collector";
export { CloudJob } from "./cloud/cloud-job";
export { QueueHub } from "./queue/hub";

const app = createApp();

export default {
  fetch: (request, env, ctx) => hostCall(request, env) ?? app.fetch(request, env, ctx),
} satisfies ExportedHandler<Env>;
