import { Page } from "../components/page";
import type { ViewProps } from "../views";

/** Metrics (being built). */
export function MetricsView(_props: ViewProps) {
  return (
    <Page title="Metrics">
      <p>Not built yet.</p>
    </Page>
  );
}
