import { Page } from "../components/page";
import type { ViewProps } from "../views";

/** Limits and approvals (being built). */
export function LimitsView(_props: ViewProps) {
  return (
    <Page title="Limits and approvals">
      <p>Not built yet.</p>
    </Page>
  );
}
