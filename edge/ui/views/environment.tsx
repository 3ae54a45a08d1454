import { useState } from "preact/hooks";
import type { z } from "zod";
import type { Environment } from "../../../shared/schemas/environments";
import type { CatalogueOption } from "../../../shared/schemas/option-catalogue";
import { MASK } from "../../../shared/secrets-mask";
import { call, endpoints } from "../api";
import { ConfirmButton } from "../components/controls";
import { ErrorNote } from "../components/error-note";
import { Field, FieldError } from "../components/field";
import { formatTime } from "../components/format";
import { Page, Panel } from "../components/page";
import { useAction, useLoad } from "../components/use-load";
import { href, navigate } from "../router";
import { can, me } from "../session";
import { DataloaderEditor } from "./environment-dataloader";
import { EnvironmentRuns } from "./environment-runs";
import { fieldErrors, idFor } from "./environment-fields";

type Env = z.output<typeof Environment>;
type Value = string | number | boolean | null;

/** One environment: details, options, dataloader, and what its owner may do with it. */
export function EnvironmentPage({ name }: { name: string }) {
  const env = useLoad(() => call(endpoints.configGet, { params: { name } }), [name]);
  const catalogue = useLoad(() => call(endpoints.trainingOptions, {}), []);
  const data = env.data;
  const editable = !!data && can("researcher") && (can("lead") || (data.owner !== null && data.owner === me.value?.username));
  return (
    <Page title={`Environment ${name}`} actions={<a href={href("environments")}>All environments</a>}>
      <ErrorNote error={env.error} />
      <ErrorNote error={catalogue.error} />
      {data ? (
        <>
          <p class="muted">
            Owner {data.owner ?? "unknown"} · changed {formatTime(data.updated_at)}
            {data.active ? " · your active environment" : ""}
          </p>
          {editable ? null : (
            <p class="notice" role="note">
              Read-only: this environment belongs to {data.owner ?? "another user"}; only its owner, a lead or an admin may change it.
            </p>
          )}
          <Details
            env={data}
            editable={editable}
            onSaved={(saved) => (saved.name !== name ? navigate(href("environments", saved.name)) : env.reload())}
          />
          {catalogue.data ? <OptionsForm env={data} catalogue={catalogue.data.options} editable={editable} onSaved={env.reload} /> : null}
          <DataloaderEditor env={data} editable={editable} onSaved={env.reload} />
          <Panel title="Runs" id="env-runs">
            <EnvironmentRuns name={data.name} />
          </Panel>
          <Actions env={data} editable={editable} onChanged={env.reload} />
        </>
      ) : null}
    </Page>
  );
}

/** Name, description and tags. */
function Details({ env, editable, onSaved }: { env: Env; editable: boolean; onSaved: (env: Env) => unknown }) {
  const [form, setForm] = useState({ name: env.name, description: env.description ?? "", tags: env.tags.join(", ") });
  const [saved, setSaved] = useState(false);
  const save = useAction(
    () =>
      call(endpoints.configUpdate, {
        params: { name: env.name },
        body: {
          ...(form.name !== env.name ? { name: form.name } : {}),
          description: form.description === "" ? null : form.description,
          tags: form.tags
            .split(",")
            .map((t) => t.trim())
            .filter(Boolean),
        },
      }),
    async (updated) => {
      setSaved(true);
      await onSaved(updated);
    },
  );
  const errors = fieldErrors(save.error, "body.");
  const edit = (patch: Partial<typeof form>) => {
    setForm({ ...form, ...patch });
    setSaved(false);
  };
  return (
    <Panel title="Details" id="env-details">
      <form
        class="stack"
        onSubmit={(event) => {
          event.preventDefault();
          void save.run();
        }}
      >
        <fieldset disabled={!editable} class="stack plain">
          <Field label="Name" hint={errors.name ?? "Renaming keeps the dataloader's paths."}>
            <input required value={form.name} onInput={(e) => edit({ name: e.currentTarget.value })} />
          </Field>
          <Field label="Description" hint={errors.description}>
            <textarea rows={2} value={form.description} onInput={(e) => edit({ description: e.currentTarget.value })} />
          </Field>
          <Field label="Tags" hint={errors.tags ?? "Separated by commas."}>
            <input value={form.tags} onInput={(e) => edit({ tags: e.currentTarget.value })} />
          </Field>
          {editable ? (
            <div class="row">
              <button type="submit" disabled={save.busy}>
                Save details
              </button>
            </div>
          ) : null}
        </fieldset>
        {saved ? <p role="status">Details saved.</p> : null}
        <ErrorNote error={save.error} />
      </form>
    </Panel>
  );
}

interface Row {
  name: string;
  text: string;
  /** The stored value (undefined: added here). */
  original: Value | undefined;
  option?: CatalogueOption;
}

const toText = (value: Value | undefined) => (value === undefined || value === null ? "" : String(value));

/** What a control's text is sent as: typed where it reads as its type, else as typed (the API then says what is wrong). */
function toValue(row: Row): Value | undefined {
  const text = row.text.trim();
  const type = row.option?.type;
  if (type === undefined) {
    const kind = row.original === undefined ? undefined : typeof row.original;
    if (row.original === null && text === "") return null;
    if ((kind === "number" || kind === undefined) && text !== "" && Number.isFinite(Number(text))) return Number(text);
    if ((kind === "boolean" || kind === undefined) && (text === "true" || text === "false")) return text === "true";
    return row.text;
  }
  if (text === "") return undefined;
  if (type === "boolean") return text === "true" ? true : text === "false" ? false : row.text;
  if (type === "integer" || type === "number") return Number.isFinite(Number(text)) ? Number(text) : row.text;
  return row.text;
}

/** The check made as one types: the type only; the API's rules decide on save. */
function typeProblem(row: Row): string | undefined {
  const text = row.text.trim();
  if (!row.option || text === "") return undefined;
  const { type } = row.option;
  if (type === "integer" && !/^-?\d+$/.test(text)) return `must be a whole number, not ${JSON.stringify(row.text)}`;
  if (type === "number" && !Number.isFinite(Number(text))) return `must be a number, not ${JSON.stringify(row.text)}`;
  if (type === "json")
    try {
      JSON.parse(text);
    } catch {
      return "must be JSON";
    }
  return undefined;
}

function rowsOf(config: Env["config"], catalogue: readonly CatalogueOption[]): Row[] {
  const known = new Set(catalogue.map((o) => o.name));
  return [
    ...catalogue.map((option) => ({ name: option.name, text: toText(config[option.name]), original: config[option.name], option })),
    ...Object.entries(config)
      .filter(([name]) => !known.has(name))
      .map(([name, value]) => ({ name, text: toText(value), original: value })),
  ];
}

/** The option map as a form: a control per catalogue option by its type, then the options the catalogue does not know. */
function OptionsForm({
  env,
  catalogue,
  editable,
  onSaved,
}: {
  env: Env;
  catalogue: readonly CatalogueOption[];
  editable: boolean;
  onSaved: () => unknown;
}) {
  const [rows, setRows] = useState<Row[]>(() => rowsOf(env.config, catalogue));
  const [adding, setAdding] = useState({ name: "", value: "" });
  const [addError, setAddError] = useState<string | null>(null);
  const configOf = () => {
    const config: Record<string, Value> = {};
    for (const row of rows) {
      const value = toValue(row);
      if (value !== undefined) config[row.name] = value;
    }
    return config;
  };
  // The form keeps what it sent (that is what was saved); "Options saved" says so until the next change.
  const [saved, setSaved] = useState(false);
  const save = useAction(
    () => call(endpoints.configUpdate, { params: { name: env.name }, body: { config: configOf() } }),
    async () => {
      setSaved(true);
      await onSaved();
    },
  );
  // The whole map as a training run would take it (required options, one of epochs or steps):
  // POST /api/training/validate, which saves nothing. A masked secret stands for a value stored
  // in the caller's active environment there, not this one, so its verdict is left out.
  const [verdict, setVerdict] = useState<{ valid: boolean; problems: Record<string, string> } | null>(null);
  const validate = useAction(
    () => {
      const config = configOf();
      return call(endpoints.trainingValidate, { body: config }).then((answer) => ({ answer, config }));
    },
    ({ answer, config }) => {
      const problems: Record<string, string> = {};
      for (const p of answer.errors)
        if (config[p.field] !== MASK) problems[p.field] = problems[p.field] ? `${problems[p.field]}; ${p.message}` : p.message;
      setVerdict({ valid: Object.keys(problems).length === 0, problems });
    },
  );
  const apiErrors = { ...verdict?.problems, ...fieldErrors(save.error, "body.config.") };
  const set = (name: string, text: string) => {
    setRows(rows.map((r) => (r.name === name ? { ...r, text } : r)));
    save.clear();
    setSaved(false);
    setVerdict(null);
  };
  const add = () => {
    const name = adding.name.trim();
    if (!/^--[A-Za-z0-9][A-Za-z0-9_-]*$/.test(name))
      return setAddError('An option name starts with "--", for example --flow_schedule_shift');
    setAddError(null);
    if (rows.some((r) => r.name === name)) set(name, adding.value);
    else setRows([...rows, { name, text: adding.value, original: undefined }]);
    setAdding({ name: "", value: "" });
  };
  const known = rows.filter((r) => r.option);
  const unknown = rows.filter((r) => !r.option);
  const control = (row: Row) => {
    const id = idFor("opt", row.name);
    const error = apiErrors[row.name] ?? typeProblem(row);
    const describedBy = `${id}-help${error ? ` ${id}-error` : ""}${row.option ? "" : ` ${id}-unknown`}`;
    const common = { id, "aria-describedby": describedBy, "aria-invalid": error ? ("true" as const) : undefined, disabled: !editable };
    const option = row.option;
    let input;
    if (option?.type === "boolean" || option?.type === "choice") {
      const values = option.type === "boolean" ? ["true", "false"] : [...(option.allowed ?? [])];
      if (row.text !== "" && !values.includes(row.text)) values.push(row.text);
      input = (
        <select {...common} value={row.text} onChange={(e) => set(row.name, e.currentTarget.value)}>
          <option value="">Not set{option.default !== null ? ` (default ${String(option.default)})` : ""}</option>
          {values.map((v) => (
            <option key={v} value={v}>
              {v}
            </option>
          ))}
        </select>
      );
    } else if (option?.type === "json")
      input = <textarea {...common} rows={3} value={row.text} onInput={(e) => set(row.name, e.currentTarget.value)} />;
    else
      input = (
        <input
          {...common}
          value={row.text}
          inputMode={option?.type === "integer" ? "numeric" : option?.type === "number" ? "decimal" : undefined}
          placeholder={option && option.default !== null ? String(option.default) : ""}
          autoComplete="off"
          onInput={(e) => set(row.name, e.currentTarget.value)}
        />
      );
    return (
      <div class="option-row" key={row.name}>
        <label for={id} class="option-name">
          <code>{row.name}</code>
        </label>
        {input}
        <div class="option-help" id={`${id}-help`}>
          {option ? (
            <>
              <span class="muted">{option.type}</span> {option.help}
              {option.default !== null ? ` Default: ${String(option.default)}.` : ""}
              {option.admin_only ? " Admins only." : ""}
              {option.secret ? " Secret: shown masked; leave ******** to keep it." : ""}
            </>
          ) : (
            <span class="badge" id={`${id}-unknown`}>
              not in the catalogue
            </span>
          )}
        </div>
        <FieldError id={id} error={error} />
        {!option && editable ? (
          <button type="button" onClick={() => setRows(rows.filter((r) => r !== row))} aria-label={`Remove ${row.name}`}>
            Remove
          </button>
        ) : null}
      </div>
    );
  };
  return (
    <Panel title="Options" id="env-options">
      <p class="muted">
        Each option the service knows, by its type; a blank one is left out (its default applies). Saving checks them by the rules of{" "}
        <code>POST /api/training/validate</code> and saves nothing when one is refused.
      </p>
      <form
        class="stack"
        onSubmit={(event) => {
          event.preventDefault();
          void save.run();
        }}
      >
        <div class="options-grid">{known.map(control)}</div>
        <h3>Other options</h3>
        {unknown.length ? <div class="options-grid">{unknown.map(control)}</div> : <p class="muted">None.</p>}
        {editable ? (
          <div class="row add-option">
            <Field label="Option name" hint={addError ?? undefined}>
              <input value={adding.name} autoComplete="off" onInput={(e) => setAdding({ ...adding, name: e.currentTarget.value })} />
            </Field>
            <Field label="Option value">
              <input value={adding.value} autoComplete="off" onInput={(e) => setAdding({ ...adding, value: e.currentTarget.value })} />
            </Field>
            <button type="button" onClick={add}>
              Add option
            </button>
          </div>
        ) : null}
        <div class="row">
          {editable ? (
            <button type="submit" class="primary" disabled={save.busy}>
              Save options
            </button>
          ) : null}
          {can("researcher") ? (
            <button type="button" onClick={() => void validate.run()} disabled={validate.busy}>
              Check as a training run
            </button>
          ) : null}
        </div>
        {saved ? <p role="status">Options saved.</p> : null}
        {verdict ? (
          <div role="status">
            {verdict.valid ? (
              <p>Valid as a whole configuration (POST /api/training/validate); nothing was saved.</p>
            ) : (
              <>
                <p>As a training run, {Object.keys(verdict.problems).length} option(s) need attention (each is marked beside its field):</p>
                <ul>
                  {Object.entries(verdict.problems).map(([field, message]) => (
                    <li key={field}>
                      <code>{field}</code>: {message}
                    </li>
                  ))}
                </ul>
              </>
            )}
          </div>
        ) : null}
        <ErrorNote error={validate.error} />
        <ErrorNote error={save.error} />
      </form>
    </Panel>
  );
}

/** Activate, export (a download), delete with a confirm step. */
function Actions({ env, editable, onChanged }: { env: Env; editable: boolean; onChanged: () => unknown }) {
  const activate = useAction(() => call(endpoints.configActivate, { params: { name: env.name } }), onChanged);
  const exported = useAction(async () => {
    const file = await call(endpoints.configExport, { params: { name: env.name } });
    const url = URL.createObjectURL(new Blob([JSON.stringify(file, null, 2)], { type: "application/json" }));
    const link = document.createElement("a");
    link.href = url;
    link.download = `${env.name}.json`;
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
  });
  const remove = useAction(
    () => call(endpoints.configDelete, { params: { name: env.name } }),
    () => navigate(href("environments")),
  );
  return (
    <Panel title="Use, export, delete" id="env-actions">
      <div class="row">
        {editable && !env.active ? (
          <button type="button" onClick={() => void activate.run()} disabled={activate.busy}>
            Make active
          </button>
        ) : null}
        <button type="button" onClick={() => void exported.run()} disabled={exported.busy}>
          Export (download)
        </button>
        {editable ? (
          <ConfirmButton
            label="Delete"
            name={`Delete ${env.name}`}
            question={`Delete ${env.name}? Jobs already submitted keep running.`}
            confirmLabel="Yes, delete"
            onConfirm={remove.run}
            busy={remove.busy}
            error={remove.error}
          />
        ) : null}
      </div>
      <ErrorNote error={activate.error} />
      <ErrorNote error={exported.error} />
    </Panel>
  );
}
