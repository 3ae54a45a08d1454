import { Page } from "../components/page";
import type { ViewProps } from "../views";

/** Job (being built). */
export function JobView(_props: ViewProps) {
  return (
    <Page title="Job">
      <p>Not built yet.</p>
    </Page>
  );
}
