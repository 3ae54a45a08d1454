import { Page } from "../components/page";
import type { ViewProps } from "../views";

/** Submit a job (being built). */
export function SubmitView(_props: ViewProps) {
  return (
    <Page title="Submit a job">
      <p>Not built yet.</p>
    </Page>
  );
}
