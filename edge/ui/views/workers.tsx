import { Page } from "../components/page";
import type { ViewProps } from "../views";

/** Workers (being built). */
export function WorkersView(_props: ViewProps) {
  return (
    <Page title="Workers">
      <p>Not built yet.</p>
    </Page>
  );
}
