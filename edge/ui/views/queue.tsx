import { Page } from "../components/page";
import type { ViewProps } from "../views";

/** Queue (being built). */
export function QueueView(_props: ViewProps) {
  return (
    <Page title="Queue">
      <p>Not built yet.</p>
    </Page>
  );
}
