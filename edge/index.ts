import { createApp } from "./app";
import type { Env } from "./env";

export { Scheduler } from "./scheduler/scheduler";
export { EventsHub } from "./jobs/hub";
export { WorkerChannel } from "./workers/channel";

const app = createApp();

export default {
  fetch: (request, env, ctx) => app.fetch(request, env, ctx),
} satisfies ExportedHandler<Env>;
