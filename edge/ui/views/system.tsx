import { Page } from "../components/page";
import type { ViewProps } from "../views";

/** GPUs and workers (being built). */
export function SystemView(_props: ViewProps) {
  return (
    <Page title="GPUs and workers">
      <p>Not built yet.</p>
    </Page>
  );
}
