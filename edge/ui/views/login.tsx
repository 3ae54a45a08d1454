import { useState } from "preact/hooks";
import { call, endpoints } from "../api";
import { ErrorNote } from "../components/error-note";
import { Field, formValues } from "../components/field";
import { useAction, useLoad } from "../components/use-load";
import { loadSession, sessionEnded } from "../session";

/** Creates the first admin while the service has no user (what `npm start` asks for first). */
function FirstAdminForm() {
  const create = useAction((values: Record<string, string>) =>
    call(endpoints.firstAdmin, {
      body: {
        email: values.email!,
        username: values.username!,
        password: values.password!,
        ...(values.setup_token ? { setup_token: values.setup_token } : {}),
      },
    }).then(loadSession),
  );
  return (
    <form
      class="stack"
      onSubmit={(event) => {
        event.preventDefault();
        void create.run(formValues(event.currentTarget));
      }}
    >
      <p>No user exists yet. Create the first administrator.</p>
      <Field label="Email">
        <input name="email" type="email" autoComplete="email" required />
      </Field>
      <Field label="Username">
        <input name="username" autoComplete="username" required minLength={3} />
      </Field>
      <Field label="Password" hint="At least 8 characters.">
        <input name="password" type="password" autoComplete="new-password" required minLength={8} />
      </Field>
      <Field label="Setup token" hint="Only from another machine than the service's: the token `npm start` printed.">
        <input name="setup_token" autoComplete="off" />
      </Field>
      <button type="submit" class="primary" disabled={create.busy}>
        Create administrator
      </button>
      <ErrorNote error={create.error} />
    </form>
  );
}

function LoginForm() {
  const [username, setUsername] = useState("");
  const login = useAction((values: Record<string, string>) =>
    call(endpoints.login, { body: { username: values.username!, password: values.password! } }).then(loadSession),
  );
  return (
    <form
      class="stack"
      onSubmit={(event) => {
        event.preventDefault();
        void login.run(formValues(event.currentTarget));
      }}
    >
      {sessionEnded.value ? <p class="notice">Your session ended. Log in again to go on.</p> : null}
      <Field label="Username">
        <input
          name="username"
          autoComplete="username"
          required
          value={username}
          onInput={(event) => setUsername(event.currentTarget.value)}
        />
      </Field>
      <Field label="Password">
        <input name="password" type="password" autoComplete="current-password" required />
      </Field>
      <button type="submit" class="primary" disabled={login.busy}>
        Log in
      </button>
      <ErrorNote error={login.error} />
    </form>
  );
}

/** The page shown without a session: the login form, or the first admin's form on a new service. */
export function LoginView() {
  const status = useLoad(() => call(endpoints.setupStatus, {}), []);
  return (
    <main id="main" class="center">
      <div class="card login">
        <h1>Training service</h1>
        <ErrorNote error={status.error} />
        {status.data?.needs_setup ? <FirstAdminForm /> : status.data ? <LoginForm /> : <p aria-busy="true">Loading…</p>}
      </div>
    </main>
  );
}
