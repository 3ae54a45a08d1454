import { Page } from "../components/page";
import type { ViewProps } from "../views";

/** Cloud and providers (being built). */
export function CloudView(_props: ViewProps) {
  return (
    <Page title="Cloud and providers">
      <p>Not built yet.</p>
    </Page>
  );
}
