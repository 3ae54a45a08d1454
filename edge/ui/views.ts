import type { FunctionComponent } from "preact";
import type { Level } from "../../shared/levels";
import { AuditView } from "./views/audit";
import { CloudView } from "./views/cloud";
import { CompareView } from "./views/compare";
import { CostView } from "./views/cost";
import { DatasetsView } from "./views/datasets";
import { EnvironmentsView } from "./views/environments";
import { JobView } from "./views/job";
import { KeysView } from "./views/keys";
import { LimitsView } from "./views/limits";
import { MetricsView } from "./views/metrics";
import { NotificationsView } from "./views/notifications";
import { QueueView } from "./views/queue";
import { RunsView } from "./views/runs";
import { SubmitView } from "./views/submit";
import { SystemView } from "./views/system";
import { UsersView } from "./views/users";
import { WorkersView } from "./views/workers";
import type { ViewProps } from "./view-props";

export interface ViewEntry {
  /** The first path segment: `#/queue`. */
  name: string;
  title: string;
  /** The lowest level that may open it (the API enforces the same). */
  level: Level;
  component: FunctionComponent<ViewProps>;
  /** Listed in the navigation (a job page is reached from the queue instead). */
  nav: boolean;
  /** Navigation group. */
  group: "work" | "admin";
}

/** Every view of the dashboard, in navigation order. */
export const VIEWS: ViewEntry[] = [
  { name: "queue", title: "Queue", level: "viewer", component: QueueView, nav: true, group: "work" },
  { name: "submit", title: "Submit a job", level: "researcher", component: SubmitView, nav: true, group: "work" },
  { name: "jobs", title: "Job", level: "viewer", component: JobView, nav: false, group: "work" },
  { name: "environments", title: "Environments", level: "viewer", component: EnvironmentsView, nav: true, group: "work" },
  { name: "datasets", title: "Datasets", level: "viewer", component: DatasetsView, nav: true, group: "work" },
  { name: "runs", title: "Runs", level: "viewer", component: RunsView, nav: true, group: "work" },
  { name: "compare", title: "Compare runs", level: "viewer", component: CompareView, nav: false, group: "work" },
  { name: "system", title: "GPUs and workers", level: "viewer", component: SystemView, nav: true, group: "work" },
  { name: "cost", title: "Cost", level: "researcher", component: CostView, nav: true, group: "work" },
  { name: "keys", title: "API keys", level: "viewer", component: KeysView, nav: true, group: "work" },
  { name: "notifications", title: "Notifications", level: "viewer", component: NotificationsView, nav: true, group: "work" },
  { name: "users", title: "Users", level: "admin", component: UsersView, nav: true, group: "admin" },
  { name: "workers", title: "Workers", level: "admin", component: WorkersView, nav: true, group: "admin" },
  { name: "limits", title: "Limits and approvals", level: "admin", component: LimitsView, nav: true, group: "admin" },
  { name: "cloud", title: "Cloud and providers", level: "admin", component: CloudView, nav: true, group: "admin" },
  { name: "metrics", title: "Metrics", level: "admin", component: MetricsView, nav: true, group: "admin" },
  { name: "audit", title: "Audit trail", level: "admin", component: AuditView, nav: true, group: "admin" },
];
