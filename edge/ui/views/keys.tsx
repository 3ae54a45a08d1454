import { useState } from "preact/hooks";
import type { z } from "zod";
import type { ApiKey, ApiKeyCreated } from "../../../shared/schemas/auth";
import { call, endpoints } from "../api";
import { ErrorNote } from "../components/error-note";
import { Field, formValues } from "../components/field";
import { formatTime } from "../components/format";
import { Page, Panel } from "../components/page";
import { useAction, useLoad } from "../components/use-load";
import { me } from "../session";
import type { ViewProps } from "../view-props";
import { ConfirmButton, OnceSecret } from "../components/controls";
import "./system.css";

type Key = z.output<typeof ApiKey>;

function keyState(key: Key): "revoked" | "expired" | "active" {
  if (key.revoked_at) return "revoked";
  if (key.expires_at && new Date(key.expires_at).getTime() <= Date.now()) return "expired";
  return "active";
}

/** One key's row: what it is, whether it still works, and a revoke button with a confirm step. */
function KeyRow({ apiKey, onRevoked }: { apiKey: Key; onRevoked: () => unknown }) {
  const revoke = useAction(() => call(endpoints.apiKeyRevoke, { params: { key_id: apiKey.id } }), onRevoked);
  const state = keyState(apiKey);
  return (
    <tr>
      <th scope="row">{apiKey.name}</th>
      <td>
        <code>{apiKey.prefix}…</code>
      </td>
      <td>{state === "revoked" ? `revoked ${formatTime(apiKey.revoked_at)}` : state}</td>
      <td>{formatTime(apiKey.created_at)}</td>
      <td>{apiKey.expires_at ? formatTime(apiKey.expires_at) : "never"}</td>
      <td>{formatTime(apiKey.last_used_at)}</td>
      <td>
        {state === "active" ? (
          <ConfirmButton
            label="Revoke"
            name={`Revoke ${apiKey.name}`}
            question={`Revoke ${apiKey.name}? Anything using it is refused from now on.`}
            confirmLabel="Yes, revoke"
            onConfirm={revoke.run}
            busy={revoke.busy}
            error={revoke.error}
          />
        ) : (
          "-"
        )}
      </td>
    </tr>
  );
}

/** API keys: the caller's own keys; create one (the whole key shown once) or revoke one. */
export function KeysView(_props: ViewProps) {
  const list = useLoad(() => call(endpoints.apiKeyList, {}), []);
  const [created, setCreated] = useState<z.output<typeof ApiKeyCreated> | null>(null);
  const create = useAction(
    (values: Record<string, string>) =>
      call(endpoints.createApiKey, {
        body: { name: values.name ?? "", ...(values.expires_in_days ? { expires_in_days: Number(values.expires_in_days) } : {}) },
      }),
    async (key) => {
      setCreated(key);
      await list.reload();
    },
  );
  const session = me.value?.auth_method === "session";
  return (
    <Page title="API keys">
      <p>
        An API key lets the <code>jobs</code> command line, scripts and CI act as you ({me.value?.username}, {me.value?.level ?? "no level"}
        ): send it as <code>X-API-Key</code>. It can do what you can, except make more keys.
      </p>
      <Panel title="Create a key">
        {session ? (
          <form
            class="row"
            onSubmit={async (event) => {
              event.preventDefault();
              const form = event.currentTarget;
              if (await create.run(formValues(form))) form.reset();
            }}
          >
            <Field label="Name" hint="What it is for, e.g. laptop">
              <input name="name" required maxLength={100} autoComplete="off" />
            </Field>
            <Field label="Expires in days" hint="Empty: never">
              <input name="expires_in_days" type="number" min={1} max={3650} inputMode="numeric" />
            </Field>
            <button type="submit" class="primary" disabled={create.busy}>
              Create key
            </button>
          </form>
        ) : (
          <p class="notice">Keys are made with a logged-in session, not with another key.</p>
        )}
        <ErrorNote error={create.error} />
      </Panel>
      {created ? (
        <OnceSecret title={`Your new key ${created.name}.`} value={created.key}>
          <button type="button" onClick={() => setCreated(null)}>
            I have copied it
          </button>
        </OnceSecret>
      ) : null}
      <Panel title="Your keys">
        <ErrorNote error={list.error} />
        {list.data ? (
          list.data.keys.length ? (
            <div class="table-wrap">
              <table class="system-table">
                <thead>
                  <tr>
                    <th scope="col">Name</th>
                    <th scope="col">Starts with</th>
                    <th scope="col">State</th>
                    <th scope="col">Created</th>
                    <th scope="col">Expires</th>
                    <th scope="col">Last used</th>
                    <th scope="col">Actions</th>
                  </tr>
                </thead>
                <tbody>
                  {list.data.keys.map((key) => (
                    <KeyRow
                      key={key.id}
                      apiKey={key}
                      onRevoked={() => {
                        if (created?.id === key.id) setCreated(null);
                        return list.reload();
                      }}
                    />
                  ))}
                </tbody>
              </table>
            </div>
          ) : (
            <p class="muted">You have no API keys.</p>
          )
        ) : list.error ? null : (
          <p aria-busy="true">Loading…</p>
        )}
      </Panel>
    </Page>
  );
}
