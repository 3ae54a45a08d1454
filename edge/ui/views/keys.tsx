import { Page } from "../components/page";
import type { ViewProps } from "../views";

/** API keys (being built). */
export function KeysView(_props: ViewProps) {
  return (
    <Page title="API keys">
      <p>Not built yet.</p>
    </Page>
  );
}
