import { useEffect, useState } from "preact/hooks";
import { asServiceError, type ServiceError } from "./api";
import { ErrorNote } from "./components/error-note";
import { Page } from "./components/page";
import { href, route } from "./router";
import { can, loadSession, logOut, me } from "./session";
import { VIEWS, type ViewEntry } from "./views";
import { LoginView } from "./views/login";

/** The navigation: only the views the user's level may open. */
function Nav({ current }: { current: string }) {
  const [open, setOpen] = useState(false);
  const item = (view: ViewEntry) => (
    <li key={view.name}>
      <a href={href(view.name)} aria-current={current === view.name ? "page" : undefined} onClick={() => setOpen(false)}>
        {view.title}
      </a>
    </li>
  );
  const work = VIEWS.filter((v) => v.nav && v.group === "work" && can(v.level));
  const admin = VIEWS.filter((v) => v.nav && v.group === "admin" && can(v.level));
  return (
    <nav aria-label="Main" class={open ? "nav open" : "nav"}>
      <button type="button" class="nav-toggle" aria-expanded={open} aria-controls="nav-lists" onClick={() => setOpen(!open)}>
        Menu
      </button>
      <div id="nav-lists">
        <ul>{work.map(item)}</ul>
        {admin.length ? (
          <>
            <h2 class="nav-group">Administration</h2>
            <ul>{admin.map(item)}</ul>
          </>
        ) : null}
      </div>
    </nav>
  );
}

function UserMenu() {
  const [error, setError] = useState<ServiceError | null>(null);
  const user = me.value!;
  return (
    <div class="user-menu">
      <span>
        {user.username} <span class="badge">{user.level ?? "no level"}</span>
      </span>
      <button
        type="button"
        onClick={() =>
          logOut().catch((caught) => {
            setError(asServiceError(caught));
          })
        }
      >
        Log out
      </button>
      <ErrorNote error={error} />
    </div>
  );
}

/** The view the location names, or why it cannot be shown. */
function CurrentView() {
  const [name = "queue", ...args] = route.value.parts;
  const view = VIEWS.find((v) => v.name === name);
  if (!view)
    return (
      <Page title="Not found">
        <p>
          There is no view named <code>{name}</code>. <a href={href("queue")}>Go to the queue</a>.
        </p>
      </Page>
    );
  if (!can(view.level))
    return (
      <Page title={view.title}>
        <p>
          This view needs the <strong>{view.level}</strong> level; you are <strong>{me.value?.level ?? "without a level"}</strong>.
        </p>
      </Page>
    );
  const View = view.component;
  return <View key={`${name}/${args.join("/")}`} args={args} />;
}

/** The dashboard: the login form until a session exists, then the navigation and the current view. */
export function App() {
  const [error, setError] = useState<ServiceError | null>(null);
  useEffect(() => {
    loadSession().catch((caught) => setError(asServiceError(caught)));
  }, []);
  if (error)
    return (
      <main id="main" class="center">
        <h1>Training service</h1>
        <ErrorNote error={error} />
      </main>
    );
  if (me.value === undefined)
    return (
      <main id="main" class="center" aria-busy="true">
        <p>Loading…</p>
      </main>
    );
  if (me.value === null) return <LoginView />;
  const current = route.value.parts[0] ?? "queue";
  return (
    <div class="shell">
      <a class="skip-link" href="#main" onClick={(event) => (event.preventDefault(), document.getElementById("page-title")?.focus())}>
        Skip to content
      </a>
      <header class="topbar">
        <a class="brand" href={href("queue")}>
          Training service
        </a>
        <UserMenu />
      </header>
      <Nav current={current} />
      <main id="main">
        <CurrentView />
      </main>
    </div>
  );
}
