import { Page } from "../components/page";
import type { ViewProps } from "../views";

/** Users (being built). */
export function UsersView(_props: ViewProps) {
  return (
    <Page title="Users">
      <p>Not built yet.</p>
    </Page>
  );
}
