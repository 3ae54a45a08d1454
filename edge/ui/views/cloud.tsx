import { useEffect, useRef, useState } from "preact/hooks";
import type { z } from "zod";
import type { CloudSettings, CloudSettingsUpdate, HardwareRates } from "../../../shared/schemas/cloud";
import type { ProviderSettings, ProviderSettingsUpdate } from "../../../shared/schemas/providers";
import { call, endpoints } from "../api";
import { ErrorNote } from "../components/error-note";
import { Field } from "../components/field";
import { formatTime } from "../components/format";
import { Page, Panel } from "../components/page";
import { useAction, useLoad } from "../components/use-load";
import type { ViewProps } from "../view-props";
import {
  changedOnly,
  CheckBox,
  linesOf,
  numberOrNull,
  numberText,
  SavedNote,
  TextArea,
  TextInput,
  textOrNull,
  useDraft,
  type Draft,
} from "./settings-form";

type Cloud = z.output<typeof CloudSettings>;
type Provider = z.output<typeof ProviderSettings>;

const CONSENT_CHOICES = [
  { value: "ask", label: "Always Ask", hint: "each submission confirms the summary of what it uploads" },
  { value: "allow", label: "Always Allow", hint: "no confirmation" },
  { value: "never", label: "Never Upload", hint: "cloud training is refused" },
] as const;

/*
 * The hub and S3 publishing settings (`publishing`) are not shown: only cloud jobs would deliver
 * there, and a cloud job can deliver only to the storage endpoint (hub and s3 are refused with 422
 * destination_unavailable), so nothing uses them. The API still takes them.
 */
function cloudDraft(settings: Cloud): Draft {
  return {
    consent_mode: settings.consent_mode,
    spending_limit_usd: numberText(settings.spending_limit_usd),
    spending_period: settings.spending_period,
    public_url: settings.public_url ?? "",
    poll_interval_seconds: numberText(settings.poll_interval_seconds),
    default_max_runtime_minutes: numberText(settings.default_max_runtime_minutes),
    allowed_scripts: settings.allowed_scripts.join("\n"),
  };
}

/** The update a Save sends: the changed fields only (allowed_scripts as a whole list, one entry per line). */
function cloudUpdate(before: Cloud, d: Draft): z.input<typeof CloudSettingsUpdate> {
  return changedOnly(before, {
    consent_mode: d.consent_mode as Cloud["consent_mode"],
    spending_limit_usd: numberOrNull(d.spending_limit_usd),
    spending_period: d.spending_period as Cloud["spending_period"],
    public_url: textOrNull(d.public_url),
    poll_interval_seconds: numberOrNull(d.poll_interval_seconds) as number,
    default_max_runtime_minutes: numberOrNull(d.default_max_runtime_minutes) as number,
    allowed_scripts: linesOf(d.allowed_scripts),
  });
}

/** The cloud and publishing settings: consent, the spending limit, the scripts cloud jobs may run, and where results go. */
function CloudSettingsForm() {
  const loaded = useLoad(() => call(endpoints.cloudSettings, {}), []);
  const [saved, setSaved] = useState<string | null>(null);
  const [draft, set] = useDraft(loaded.data, cloudDraft);
  const save = useAction(
    (body: z.input<typeof CloudSettingsUpdate>) => call(endpoints.cloudSettingsUpdate, { body }),
    async () => {
      await loaded.reload();
      setSaved("Cloud settings saved.");
    },
  );
  if (loaded.error) return <ErrorNote error={loaded.error} />;
  if (!loaded.data) return <p aria-busy="true">Loading…</p>;
  const text = (name: string, type: "text" | "url" = "text") => <TextInput draft={draft} set={set} name={name} type={type} />;
  return (
    <form
      class="stack settings-form"
      aria-label="Cloud settings"
      noValidate
      onSubmit={(event) => {
        event.preventDefault();
        setSaved(null);
        const changes = cloudUpdate(loaded.data!, draft);
        if (Object.keys(changes).length === 0) setSaved("Nothing changed.");
        else void save.run(changes);
      }}
    >
      <fieldset>
        <legend>Upload consent</legend>
        <div class="choices">
          {CONSENT_CHOICES.map((choice) => (
            <label class="check" key={choice.value}>
              <input
                type="radio"
                name="consent_mode"
                value={choice.value}
                checked={draft.consent_mode === choice.value}
                onChange={() => set("consent_mode", choice.value)}
              />
              <span>
                {choice.label} <span class="field-hint">({choice.hint})</span>
              </span>
            </label>
          ))}
        </div>
      </fieldset>
      <fieldset>
        <legend>Spending</legend>
        <div class="settings-grid">
          <Field label="Spending limit (USD)" hint="Finished jobs' costs plus running jobs' estimates, per period. Empty: no limit.">
            <TextInput draft={draft} set={set} name="spending_limit_usd" type="number" min={0} step="0.01" inputMode="decimal" />
          </Field>
          <Field label="Period">
            <select
              name="spending_period"
              value={draft.spending_period as string}
              onChange={(e) => set("spending_period", e.currentTarget.value)}
            >
              <option value="day">Day</option>
              <option value="week">Week</option>
              <option value="month">Month</option>
            </select>
          </Field>
          <Field label="Cost estimates assume (minutes)" hint="When neither the submission nor the environment says how long it runs.">
            <TextInput draft={draft} set={set} name="default_max_runtime_minutes" type="number" min={1} step="1" inputMode="numeric" />
          </Field>
        </div>
      </fieldset>
      <fieldset>
        <legend>Reaching this service</legend>
        <div class="settings-grid">
          <Field
            label="Public URL"
            hint="Where providers and cloud jobs reach this service (webhooks, result uploads). Empty: SERVICE_PUBLIC_URL."
          >
            {text("public_url", "url")}
          </Field>
          <Field label="Poll interval (seconds)" hint="How often each active cloud job is polled (webhooks are immediate).">
            <TextInput draft={draft} set={set} name="poll_interval_seconds" type="number" min={1} step="1" inputMode="numeric" />
          </Field>
        </div>
      </fieldset>
      <fieldset>
        <legend>Scripts cloud jobs may run</legend>
        <Field
          label="Allowed scripts"
          hint="One program per line: an absolute path in the trainer's image (like /src/hooks/notify.sh) or a bare program name, * as a wildcard. A cloud submission whose --post_checkpoint_script, --post_upload_script or --validation_external_script runs any other program is refused. Empty: none of them may be set."
        >
          <TextArea draft={draft} set={set} name="allowed_scripts" rows={4} placeholder="/src/hooks/notify.sh" />
        </Field>
      </fieldset>
      <fieldset>
        <legend>Where results go</legend>
        <p class="muted">
          Cloud jobs deliver their model only to the built-in storage endpoint: it needs the public URL above and a provider's storage
          endpoint switched on (Providers, below), and each job gets upload credentials of its own that end with it. Model hub and S3 bucket
          publishing do not apply to cloud jobs (a submission asking for them is refused), so they are not set here.
        </p>
      </fieldset>
      <div class="row">
        <button type="submit" class="primary" disabled={save.busy}>
          Save cloud settings
        </button>
        <SavedNote message={saved} />
      </div>
      <ErrorNote error={save.error} />
    </form>
  );
}

interface RateRow {
  key: number;
  name: string;
  rate: string;
}

/** USD per second of each hardware type; Save replaces the whole table. */
function RatesForm() {
  const loaded = useLoad(() => call(endpoints.cloudRates, {}), []);
  const [rows, setRows] = useState<RateRow[]>([]);
  const [saved, setSaved] = useState<string | null>(null);
  const nextKey = useRef(0);
  useEffect(() => {
    if (loaded.data) setRows(Object.entries(loaded.data).map(([name, rate]) => ({ key: nextKey.current++, name, rate: String(rate) })));
  }, [loaded.data]);
  const save = useAction(
    (rates: z.input<typeof HardwareRates>) => call(endpoints.cloudRatesUpdate, { body: rates }),
    async () => {
      await loaded.reload();
      setSaved("Rates saved; later submissions use them.");
    },
  );
  if (loaded.error) return <ErrorNote error={loaded.error} />;
  if (!loaded.data) return <p aria-busy="true">Loading…</p>;
  const edit = (key: number, change: Partial<RateRow>) => setRows(rows.map((row) => (row.key === key ? { ...row, ...change } : row)));
  return (
    <form
      class="stack settings-form"
      aria-label="Hardware rates"
      noValidate
      onSubmit={(event) => {
        event.preventDefault();
        setSaved(null);
        const named = rows.filter((row) => row.name.trim() !== "");
        // An empty or unreadable rate goes as it is: the service refuses it and names the row.
        void save.run(Object.fromEntries(named.map((row) => [row.name.trim(), numberOrNull(row.rate) as number])));
      }}
    >
      <div class="table-wrap">
        <table class="rates-table">
          <thead>
            <tr>
              <th scope="col">Hardware</th>
              <th scope="col">USD per second</th>
              <th scope="col">USD per hour</th>
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {rows.map((row, index) => {
              const perHour = Number(row.rate) * 3600;
              return (
                <tr key={row.key}>
                  <td>
                    <input
                      aria-label={`Hardware name, row ${index + 1}`}
                      value={row.name}
                      autoComplete="off"
                      onInput={(e) => edit(row.key, { name: e.currentTarget.value })}
                    />
                  </td>
                  <td>
                    <input
                      aria-label={`USD per second for ${row.name || `row ${index + 1}`}`}
                      type="number"
                      min={0}
                      step="any"
                      inputMode="decimal"
                      value={row.rate}
                      onInput={(e) => edit(row.key, { rate: e.currentTarget.value })}
                    />
                  </td>
                  <td>{Number.isFinite(perHour) ? `$${perHour.toFixed(2)}` : "-"}</td>
                  <td>
                    <button type="button" onClick={() => setRows(rows.filter((r) => r.key !== row.key))}>
                      Remove<span class="visually-hidden"> {row.name || `row ${index + 1}`}</span>
                    </button>
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      </div>
      <div class="row">
        <button type="button" onClick={() => setRows([...rows, { key: nextKey.current++, name: "", rate: "" }])}>
          Add hardware
        </button>
        <button type="submit" class="primary" disabled={save.busy}>
          Save rates
        </button>
        <SavedNote message={saved} />
      </div>
      <ErrorNote error={save.error} />
    </form>
  );
}

/** The session remembers one confirmation of turning a provider's certificate checks off (`confirm_insecure`). */
const INSECURE_CONFIRMED = "training-service.ssl-verify-off-confirmed";

function insecureConfirmed(): boolean {
  try {
    return sessionStorage.getItem(INSECURE_CONFIRMED) === "yes";
  } catch {
    return false;
  }
}

/**
 * The `ssl_verify` switch: saved the moment it changes. Turning it off first asks, in a dialog,
 * once per browser session.
 */
function SslVerifySwitch({ provider, initial, onSaved }: { provider: string; initial: boolean; onSaved: (answer: Provider) => void }) {
  const [verify, setVerify] = useState(initial);
  const [note, setNote] = useState<string | null>(null);
  const dialog = useRef<HTMLDialogElement>(null);
  const cancelButton = useRef<HTMLButtonElement>(null);
  const save = useAction(
    (on: boolean) =>
      call(endpoints.providerSettingsUpdate, {
        params: { provider },
        body: on ? { ssl_verify: true } : { ssl_verify: false, confirm_insecure: true },
      }),
    (answer) => {
      onSaved(answer);
      setVerify(answer.ssl_verify);
      setNote(answer.ssl_verify ? "Certificates are verified again; saved." : "Certificate checks are off; saved.");
    },
  );
  const turn = (on: boolean) => {
    setNote(null);
    void save.run(on);
  };
  const ask = () => {
    dialog.current?.showModal();
    cancelButton.current?.focus();
  };
  return (
    <div class="stack">
      <label class="check">
        <input
          type="checkbox"
          name="ssl_verify"
          checked={verify}
          disabled={save.busy}
          onChange={(event) => {
            const wanted = event.currentTarget.checked;
            // The box shows the saved state until the service has the new one.
            event.currentTarget.checked = verify;
            if (wanted) turn(true);
            else if (insecureConfirmed()) turn(false);
            else ask();
          }}
        />
        <span>
          Verify certificates on outbound calls (<code>ssl_verify</code>)<span class="field-hint"> Saved as soon as you switch it.</span>
        </span>
      </label>
      <SavedNote message={note} />
      <ErrorNote error={save.error} />
      <dialog ref={dialog} class="confirm-dialog" aria-labelledby="insecure-title" aria-describedby="insecure-text">
        <h2 id="insecure-title">Turn certificate verification off?</h2>
        <p id="insecure-text">
          Calls to <strong>{provider}</strong> will accept any certificate, so anyone on the network path can read or change them, the API
          token included. You are not asked again in this browser tab.
        </p>
        <div class="row">
          <button
            type="button"
            class="danger"
            onClick={() => {
              try {
                sessionStorage.setItem(INSECURE_CONFIRMED, "yes");
              } catch {
                // Storage refused (private mode): the next switch-off asks again, which is safe.
              }
              dialog.current?.close();
              turn(false);
            }}
          >
            Confirm: turn verification off
          </button>
          <button type="button" ref={cancelButton} onClick={() => dialog.current?.close()}>
            Cancel
          </button>
        </div>
      </dialog>
    </div>
  );
}

function providerDraft(s: Provider): Draft {
  return {
    webhook_allowed_ips: s.webhook_allowed_ips.join("\n"),
    ssl_ca_bundle: s.ssl_ca_bundle ?? "",
    proxy_url: s.proxy_url ?? "",
    http_timeout: numberText(s.http_timeout),
    s3_endpoint_enabled: s.s3_endpoint_enabled,
    s3_public_url: s.s3_public_url ?? "",
    s3_output_path: s.s3_output_path,
    training_model: s.training_model ?? "",
    training_destination: s.training_destination ?? "",
    hardware: s.hardware,
    allow_private_targets: s.allow_private_targets,
  };
}

/** One provider's settings: endpoint, token, webhooks, network and timeout (and what its cloud jobs run on). */
function ProviderSettingsForm({ provider }: { provider: string }) {
  const loaded = useLoad(() => call(endpoints.providerSettings, { params: { provider } }), [provider]);
  const [settings, setSettings] = useState<Provider | undefined>(undefined);
  const [saved, setSaved] = useState<string | null>(null);
  // Kept apart from `settings`: a switch saved on its own must not reset the form's unsaved edits.
  const [updatedAt, setUpdatedAt] = useState<string | null>(null);
  useEffect(() => {
    setSettings(loaded.data);
    setUpdatedAt(loaded.data?.updated_at ?? null);
  }, [loaded.data]);
  const [draft, set] = useDraft(settings, providerDraft);
  const save = useAction(
    (body: z.input<typeof ProviderSettingsUpdate>) => call(endpoints.providerSettingsUpdate, { params: { provider }, body }),
    (answer) => {
      setSettings(answer);
      setUpdatedAt(answer.updated_at);
      setSaved(`Settings of ${provider} saved; later calls use them.`);
    },
  );
  if (loaded.error) return <ErrorNote error={loaded.error} />;
  if (!settings) return <p aria-busy="true">Loading…</p>;
  const text = (name: string) => <TextInput draft={draft} set={set} name={name} />;
  return (
    <div class="stack">
      <SslVerifySwitch
        key={provider}
        provider={provider}
        initial={settings.ssl_verify}
        onSaved={(answer) => setUpdatedAt(answer.updated_at)}
      />
      <form
        class="stack settings-form"
        aria-label={`Settings of ${provider}`}
        noValidate
        onSubmit={(event) => {
          event.preventDefault();
          setSaved(null);
          const ips = String(draft.webhook_allowed_ips)
            .split(/[\s,]+/)
            .filter(Boolean);
          const changes = changedOnly(settings as unknown as Record<string, unknown>, {
            webhook_allowed_ips: ips,
            ssl_ca_bundle: textOrNull(draft.ssl_ca_bundle),
            proxy_url: textOrNull(draft.proxy_url),
            http_timeout: numberOrNull(draft.http_timeout),
            s3_endpoint_enabled: draft.s3_endpoint_enabled === true,
            s3_public_url: textOrNull(draft.s3_public_url),
            s3_output_path: textOrNull(draft.s3_output_path),
            training_model: textOrNull(draft.training_model),
            training_destination: textOrNull(draft.training_destination),
            hardware: textOrNull(draft.hardware),
            allow_private_targets: draft.allow_private_targets === true,
          });
          if (Object.keys(changes).length === 0) setSaved("Nothing changed.");
          else void save.run(changes);
        }}
      >
        <div class="settings-grid">
          <Field label="Webhook allowed IPs" hint="CIDR ranges or single addresses, one per line. Empty: any address.">
            <TextArea draft={draft} set={set} name="webhook_allowed_ips" />
          </Field>
          <Field label="CA bundle path" hint="Extra certificate authorities for outbound calls.">
            {text("ssl_ca_bundle")}
          </Field>
          <Field label="Proxy URL" hint="HTTP proxy for outbound calls (a password shows as ***).">
            {text("proxy_url")}
          </Field>
          <Field label="HTTP timeout (seconds)" hint="Per outbound call; default 30. Empty restores the default.">
            <TextInput draft={draft} set={set} name="http_timeout" type="number" min={1} step="any" inputMode="decimal" placeholder="30" />
          </Field>
          <Field label="Training model" hint='"owner/name:version": what cloud submissions run.'>
            {text("training_model")}
          </Field>
          <Field
            label="Training destination"
            hint='"owner/name": a model your Replicate account owns, never the trainer model. Each training is pushed into it; cloud submissions need it.'
          >
            {text("training_destination")}
          </Field>
          <Field label="Hardware" hint="Its rate (above) prices the jobs.">
            {text("hardware")}
          </Field>
        </div>
        <CheckBox
          draft={draft}
          set={set}
          name="allow_private_targets"
          label="Allow private targets"
          hint="Lets the API address and the proxy be loopback, private or local-name hosts (and the API address plain http): only for a provider stand-in on this machine or network."
        />
        <fieldset>
          <legend>Storage endpoint</legend>
          <div class="settings-grid">
            <CheckBox draft={draft} set={set} name="s3_endpoint_enabled" label="Cloud jobs may upload results to the storage endpoint" />
            <Field label="Storage public URL" hint="The URL jobs upload to. Empty: SERVICE_PUBLIC_URL.">
              {text("s3_public_url")}
            </Field>
            <Field label="Storage output path" hint="The folder uploads are stored in. Empty restores the default.">
              {text("s3_output_path")}
            </Field>
          </div>
        </fieldset>
        <p class="muted">
          Webhook signing secret: {settings.webhook_secret_set ? "set" : "not set"} · last changed {formatTime(updatedAt)}
        </p>
        <div class="row">
          <button type="submit" class="primary" disabled={save.busy}>
            Save provider settings
          </button>
          <SavedNote message={saved} />
        </div>
        <ErrorNote error={save.error} />
      </form>
    </div>
  );
}

/** The providers, whether their credentials validate, and the chosen one's settings. */
function ProvidersPanel() {
  const list = useLoad(() => call(endpoints.cloudProviders, {}), []);
  const [chosen, setChosen] = useState<string | null>(null);
  if (list.error) return <ErrorNote error={list.error} />;
  if (!list.data) return <p aria-busy="true">Loading…</p>;
  const usable = list.data.providers.filter((p) => !p.coming_soon);
  const provider = chosen ?? usable[0]?.name ?? null;
  return (
    <div class="stack">
      <div class="table-wrap">
        <table>
          <thead>
            <tr>
              <th scope="col">Provider</th>
              <th scope="col">Kind</th>
              <th scope="col">Credentials</th>
              <th scope="col">Capabilities</th>
            </tr>
          </thead>
          <tbody>
            {list.data.providers.map((p) => (
              <tr key={p.name}>
                <td>
                  {p.display_name} <code>{p.name}</code>
                  {p.coming_soon ? <span class="badge">coming soon</span> : null}
                </td>
                <td>{p.kind}</td>
                <td>{p.credentials ? `${p.credentials.valid ? "valid" : "not valid"}: ${p.credentials.message}` : "-"}</td>
                <td>{p.capabilities.join(", ") || "-"}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <Field label="Provider to configure">
        <select name="provider" value={provider ?? ""} onChange={(e) => setChosen(e.currentTarget.value)}>
          {usable.map((p) => (
            <option key={p.name} value={p.name}>
              {p.display_name}
            </option>
          ))}
        </select>
      </Field>
      {provider ? <ProviderSettingsForm key={provider} provider={provider} /> : null}
    </div>
  );
}

/** Cloud and providers (admin): consent, spending, publishing, rates and provider settings. */
export function CloudView(_props: ViewProps) {
  return (
    <Page title="Cloud and providers">
      <Panel title="Cloud settings" id="cloud-settings">
        <CloudSettingsForm />
      </Panel>
      <Panel title="Hardware rates" id="rates">
        <RatesForm />
      </Panel>
      <Panel title="Providers" id="providers">
        <ProvidersPanel />
      </Panel>
    </Page>
  );
}
