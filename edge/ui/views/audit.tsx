import { Page } from "../components/page";
import type { ViewProps } from "../views";

/** Audit trail (being built). */
export function AuditView(_props: ViewProps) {
  return (
    <Page title="Audit trail">
      <p>Not built yet.</p>
    </Page>
  );
}
