import { useState } from "preact/hooks";
import { LEVELS } from "../../../shared/levels";
import { call, endpoints } from "../api";
import { ErrorNote } from "../components/error-note";
import { Field, formValues } from "../components/field";
import { formatTime } from "../components/format";
import { Page, Panel } from "../components/page";
import { useAction, useLoad } from "../components/use-load";
import type { ViewProps } from "../view-props";
import "./system.css";

/** The new-user form; the service's 422 names each invalid field beside it. */
function CreateUser({ onCreated }: { onCreated: () => unknown }) {
  const [created, setCreated] = useState<string | null>(null);
  // A new form after each user made (a fresh key), rather than form.reset(), which would put the select on its first option.
  const [generation, setGeneration] = useState(0);
  const [level, setLevel] = useState<(typeof LEVELS)[number]>("researcher");
  const create = useAction(
    (values: Record<string, string>) =>
      call(endpoints.userCreate, {
        body: {
          email: values.email!,
          username: values.username!,
          password: values.password!,
          level_names: [level],
          ...(values.team_id ? { team_id: values.team_id } : {}),
        },
      }),
    async (user) => {
      setCreated(user.username);
      setLevel("researcher");
      setGeneration((g) => g + 1);
      await onCreated();
    },
  );
  return (
    <Panel title="Add a user">
      <form
        key={generation}
        class="stack"
        noValidate
        onSubmit={(event) => {
          event.preventDefault();
          setCreated(null);
          void create.run(formValues(event.currentTarget));
        }}
      >
        <div class="form-grid">
          <Field label="Email">
            <input name="email" type="email" autoComplete="off" required />
          </Field>
          <Field label="Username" hint="3 to 64 letters, digits, '.', '_' or '-'">
            <input name="username" autoComplete="off" required />
          </Field>
          <Field label="Password" hint="At least 8 characters.">
            <input name="password" type="password" autoComplete="new-password" required />
          </Field>
          <Field label="Level">
            <select name="level" value={level} onChange={(event) => setLevel(event.currentTarget.value as (typeof LEVELS)[number])}>
              {LEVELS.map((level) => (
                <option key={level} value={level}>
                  {level}
                </option>
              ))}
            </select>
          </Field>
          <Field label="Team" hint="Optional: the team whose fair-share limit the user's jobs count against.">
            <input name="team_id" autoComplete="off" />
          </Field>
        </div>
        <div class="row">
          <button type="submit" class="primary" disabled={create.busy}>
            Create user
          </button>
        </div>
        <ErrorNote error={create.error} />
        {created ? (
          <p class="notice" role="status">
            Created {created}. They can log in now.
          </p>
        ) : null}
      </form>
    </Panel>
  );
}

/** Whether anyone may register themselves as a researcher (PUT /api/cloud/auth/registration). */
function Registration() {
  const status = useLoad(() => call(endpoints.setupStatus, {}), []);
  const save = useAction(
    (enabled: boolean) => call(endpoints.registrationSet, { body: { enabled } }),
    () => status.reload(),
  );
  const enabled = status.data?.registration_enabled;
  return (
    <Panel title="Public registration">
      <ErrorNote error={status.error} />
      {enabled === undefined ? (
        status.error ? null : (
          <p aria-busy="true">Loading…</p>
        )
      ) : (
        <>
          <p>
            Public registration is <strong>{enabled ? "open" : "closed"}</strong>.{" "}
            {enabled
              ? "Anyone who reaches the service can create a researcher account."
              : "Only an admin creates accounts (here, or with POST /api/users)."}
          </p>
          <button type="button" disabled={save.busy} onClick={() => void save.run(!enabled)}>
            {enabled ? "Close registration" : "Open registration"}
          </button>
          <ErrorNote error={save.error} />
        </>
      )}
    </Panel>
  );
}

/** Users (admin): everyone with levels and team, a form for a new user, and the registration switch. */
export function UsersView(_props: ViewProps) {
  const list = useLoad(() => call(endpoints.userList, {}), []);
  return (
    <Page title="Users">
      <CreateUser onCreated={list.reload} />
      <Panel title="Everyone">
        <ErrorNote error={list.error} />
        {list.data ? (
          <div class="table-wrap">
            <table class="system-table">
              <thead>
                <tr>
                  <th scope="col">Username</th>
                  <th scope="col">Email</th>
                  <th scope="col">Level</th>
                  <th scope="col">Team</th>
                  <th scope="col">Priority</th>
                  <th scope="col">Created</th>
                </tr>
              </thead>
              <tbody>
                {list.data.users.map((user) => (
                  <tr key={user.id}>
                    <th scope="row">{user.username}</th>
                    <td>{user.email}</td>
                    <td>{user.levels.length > 1 ? `${user.level} (${user.levels.join(", ")})` : (user.level ?? "none")}</td>
                    <td>{user.team_id ?? "-"}</td>
                    <td>{user.priority}</td>
                    <td>{formatTime(user.created_at)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        ) : list.error ? null : (
          <p aria-busy="true">Loading…</p>
        )}
      </Panel>
      <Registration />
    </Page>
  );
}
