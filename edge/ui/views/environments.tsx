import { useState } from "preact/hooks";
import type { z } from "zod";
import type { EnvironmentExport } from "../../../shared/schemas/environments";
import { asServiceError, call, endpoints, ServiceError } from "../api";
import { ErrorNote } from "../components/error-note";
import { Field } from "../components/field";
import { formatTime } from "../components/format";
import { Page, Panel } from "../components/page";
import { useAction, useLoad } from "../components/use-load";
import { href, navigate } from "../router";
import { can } from "../session";
import type { ViewProps } from "../view-props";
import { EnvironmentPage } from "./environment";
import "./environments.css";

type Exported = z.output<typeof EnvironmentExport>;

/** `#/environments` lists them; `#/environments/<name>` is one environment's page. */
export function EnvironmentsView({ args }: ViewProps) {
  if (args[0]) return <EnvironmentPage key={args[0]} name={args[0]} />;
  return <EnvironmentList />;
}

function EnvironmentList() {
  const list = useLoad(() => call(endpoints.configList, {}), []);
  return (
    <Page title="Environments" actions={<button onClick={() => void list.reload()}>Reload</button>}>
      <p>
        An environment is a training configuration: its options (what <code>train.py</code> is given) and its dataloader (which datasets it
        reads). Anyone may read one; its owner, a lead or an admin may change it.
      </p>
      <ErrorNote error={list.error} />
      <div class="table-wrap">
        <table>
          <caption class="muted">{list.data ? `${list.data.environments.length} environment(s)` : "Loading…"}</caption>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Owner</th>
              <th scope="col">Model</th>
              <th scope="col">Tags</th>
              <th scope="col">Last run</th>
              <th scope="col">Changed</th>
            </tr>
          </thead>
          <tbody>
            {list.data?.environments.map((env) => (
              <tr key={env.name}>
                <th scope="row">
                  <a href={href("environments", env.name)}>{env.name}</a>
                  {env.active ? <span class="badge"> active</span> : null}
                  {env.description ? <div class="muted">{env.description}</div> : null}
                </th>
                <td>{env.owner ?? "-"}</td>
                <td>{[env.model_family, env.model_type].filter(Boolean).join(" ") || "-"}</td>
                <td>
                  {env.tags.map((tag) => (
                    <span class="tag" key={tag}>
                      {tag}
                    </span>
                  ))}
                </td>
                <td>
                  {env.last_run ? (
                    <>
                      <a href={href("jobs", env.last_run.job_id)}>{env.last_run.job_id}</a> {env.last_run.status},{" "}
                      {formatTime(env.last_run.completed_at ?? env.last_run.started_at ?? env.last_run.queued_at)}
                    </>
                  ) : (
                    "-"
                  )}
                </td>
                <td>{formatTime(env.updated_at)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {can("researcher") ? (
        <>
          <CreateEnvironment />
          <ImportEnvironment />
        </>
      ) : null}
    </Page>
  );
}

/** A new environment: from scratch (model fields only) or copied from a shipped example. */
function CreateEnvironment() {
  const examples = useLoad(() => call(endpoints.configExamples, {}), []);
  const [form, setForm] = useState({ name: "", example: "", model_family: "", model_type: "" });
  const create = useAction(
    () =>
      call(endpoints.configCreate, {
        body: {
          name: form.name,
          ...(form.example ? { from_example: form.example } : {}),
          ...(form.model_family ? { model_family: form.model_family } : {}),
          ...(form.model_type ? { model_type: form.model_type } : {}),
        },
      }),
    (env) => navigate(href("environments", env.name)),
  );
  return (
    <Panel title="Create an environment" id="create-environment">
      <form
        class="stack"
        onSubmit={(event) => {
          event.preventDefault();
          void create.run();
        }}
      >
        <Field label="Name" hint="1 to 64 letters, digits, '.', '_' or '-'; it names the job's folders.">
          <input required value={form.name} autoComplete="off" onInput={(e) => setForm({ ...form, name: e.currentTarget.value })} />
        </Field>
        <Field label="Start from" hint="An example's options, tags and dataloader, or an empty option map.">
          <select value={form.example} onChange={(e) => setForm({ ...form, example: e.currentTarget.value })}>
            <option value="">Scratch (empty)</option>
            {examples.data?.examples.map((example) => (
              <option key={example.name} value={example.name}>
                Example: {example.name}
              </option>
            ))}
          </select>
        </Field>
        <Field label="Model family" hint="Optional: sdxl, flux, sd3, ... (--model_family).">
          <input value={form.model_family} autoComplete="off" onInput={(e) => setForm({ ...form, model_family: e.currentTarget.value })} />
        </Field>
        <Field label="Model type" hint="Optional (--model_type).">
          <select value={form.model_type} onChange={(e) => setForm({ ...form, model_type: e.currentTarget.value })}>
            <option value="">Not set</option>
            <option value="lora">lora</option>
            <option value="full">full</option>
          </select>
        </Field>
        <div class="row">
          <button type="submit" class="primary" disabled={create.busy}>
            Create
          </button>
        </div>
        <ErrorNote error={create.error} />
        <ErrorNote error={examples.error} />
      </form>
    </Panel>
  );
}

/** What an exported file must hold to be imported: read here only to say clearly what is wrong. */
function readExport(text: string): Exported {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new ServiceError(422, "invalid_file", "The file is not JSON: choose a file that GET /api/configs/{name}/export wrote");
  }
  const file = parsed as Partial<Exported> | null;
  if (
    !file ||
    typeof file !== "object" ||
    typeof file.name !== "string" ||
    typeof file.config !== "object" ||
    !Array.isArray(file.dataloader)
  )
    throw new ServiceError(422, "invalid_file", "The file is not an exported environment (it needs name, config and dataloader)");
  return file as Exported;
}

/**
 * Import: the file's environment created under its name (or the one given) and then given its
 * description, tags, options and dataloader, as two API calls; the API checks both. When the
 * second is refused the new environment is deleted again, so a refused import leaves nothing.
 */
function ImportEnvironment() {
  const [file, setFile] = useState<File | null>(null);
  const [name, setName] = useState("");
  const run = useAction(
    async () => {
      if (!file) throw new ServiceError(422, "no_file", "Choose a file first");
      const exported = readExport(await file.text());
      const target = name.trim() || exported.name;
      await call(endpoints.configCreate, { body: { name: target } });
      try {
        await call(endpoints.configUpdate, {
          params: { name: target },
          body: { description: exported.description, tags: exported.tags, config: exported.config, dataloader: exported.dataloader },
        });
      } catch (error) {
        await call(endpoints.configDelete, { params: { name: target } }).catch(() => undefined);
        throw asServiceError(error);
      }
      return target;
    },
    (target) => navigate(href("environments", target)),
  );
  return (
    <Panel title="Import an environment" id="import-environment">
      <form
        class="stack"
        onSubmit={(event) => {
          event.preventDefault();
          void run.run();
        }}
      >
        <Field label="Exported file" hint="A .json file as Export (GET /api/configs/{name}/export) writes it.">
          <input type="file" accept=".json,application/json" required onChange={(e) => setFile(e.currentTarget.files?.[0] ?? null)} />
        </Field>
        <Field label="Import as" hint="Default: the name in the file.">
          <input value={name} autoComplete="off" onInput={(e) => setName(e.currentTarget.value)} />
        </Field>
        <div class="row">
          <button type="submit" disabled={run.busy}>
            Import
          </button>
        </div>
        <ErrorNote error={run.error} />
      </form>
    </Panel>
  );
}
