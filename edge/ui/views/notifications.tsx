import { useState } from "preact/hooks";
import { ADMIN_NOTIFICATION_KINDS, NOTIFICATION_KINDS, type NotificationKind } from "../../../shared/notification-kinds";
import type { NotificationPreferences, NotificationPreferencesUpdate, SmtpSettings } from "../../../shared/schemas/notifications";
import { call, endpoints } from "../api";
import { ErrorNote } from "../components/error-note";
import { FieldError, FieldWithError } from "../components/field";
import { formatTime } from "../components/format";
import { Page, Panel } from "../components/page";
import { useAction, useLoad } from "../components/use-load";
import { can } from "../session";
import type { ViewProps } from "../view-props";
import { fieldErrors } from "./environment-fields";
import { SavedNote, useDraft, type Draft } from "./settings-form";
import "./notifications.css";

const KIND_LABELS: Record<NotificationKind, string> = {
  "job.started": "A job of mine started",
  "job.stalled": "A job of mine stalled (no progress)",
  "job.completed": "A job of mine completed",
  "job.failed": "A job of mine failed",
  "approval.needed": "A job waits for an admin's approval",
  "approval.decided": "A job of mine was approved or rejected",
  "budget.warning": "My budget is 80 % used",
  "budget.exceeded": "My budget is used up",
  "gpu.quarantined": "A GPU was taken out of allocation",
};

const TLS_MODES: { value: SmtpSettings["tls"]; label: string }[] = [
  { value: "starttls", label: "STARTTLS (port 587)" },
  { value: "tls", label: "TLS from the start (port 465)" },
  { value: "none", label: "None: plain (a local relay)" },
];

const channelText = (channels: NotificationPreferences["channels"]) => ({
  webhook: channels.webhook?.url ?? "",
  slack: channels.slack?.url ?? "",
  email: channels.email?.address ?? "",
});

const prefsDraft = (prefs: NotificationPreferences): Draft => ({
  ...Object.fromEntries(NOTIFICATION_KINDS.map((kind) => [kind, prefs.kinds.includes(kind)])),
  ...channelText(prefs.channels),
});

const trimmed = (value: string | boolean | undefined) => String(value ?? "").trim();

/** The signed-in user's preferences: the kinds they want and their channels (GET/PUT /api/users/me/notifications). */
function Preferences({ onSaved }: { onSaved: () => unknown }) {
  const prefs = useLoad(() => call(endpoints.notificationPreferences, {}), []);
  const [draft, set] = useDraft(prefs.data, prefsDraft);
  const [saved, setSaved] = useState<string | null>(null);
  const admin = can("admin");
  // Kinds only admins are ever sent are not offered to others; whatever they hold is kept as it is.
  const shown = NOTIFICATION_KINDS.filter((kind) => admin || !ADMIN_NOTIFICATION_KINDS.includes(kind));
  const save = useAction(
    (body: NotificationPreferencesUpdate) => call(endpoints.notificationPreferencesUpdate, { body }),
    async () => {
      await prefs.reload();
      setSaved("Preferences saved.");
      await onSaved();
    },
  );
  const errors = fieldErrors(save.error, "body.");
  const kindsError = Object.entries(errors)
    .filter(([path]) => path.startsWith("kinds"))
    .map(([, message]) => message)
    .join("; ");
  if (!prefs.data) return <ErrorNote error={prefs.error} />;
  const stored = prefs.data;
  const submit = () => {
    setSaved(null);
    const kinds = NOTIFICATION_KINDS.filter((kind) => (shown.includes(kind) ? draft[kind] === true : stored.kinds.includes(kind)));
    const url = (name: string) => (trimmed(draft[name]) ? { url: trimmed(draft[name]) } : null);
    void save.run({
      kinds,
      channels: {
        webhook: url("webhook"),
        slack: url("slack"),
        email: trimmed(draft.email) ? { address: trimmed(draft.email) } : null,
      },
    });
  };
  const text = (name: "webhook" | "slack" | "email") => ({
    value: (draft[name] as string | undefined) ?? "",
    onInput: (event: { currentTarget: HTMLInputElement }) => set(name, event.currentTarget.value),
    autoComplete: "off",
    spellcheck: false,
  });
  return (
    <form
      class="stack settings-form"
      aria-label="Notification preferences"
      noValidate
      onSubmit={(event) => {
        event.preventDefault();
        submit();
      }}
    >
      <fieldset aria-describedby={kindsError ? "notify-kinds-error" : undefined}>
        <legend>What to hear of</legend>
        <div class="choices">
          {shown.map((kind) => (
            <label class="check" key={kind}>
              <input type="checkbox" name={kind} checked={draft[kind] === true} onChange={(e) => set(kind, e.currentTarget.checked)} />
              <span>
                {KIND_LABELS[kind]} <code class="muted">{kind}</code>
              </span>
            </label>
          ))}
        </div>
        <FieldError id="notify-kinds" error={kindsError} />
      </fieldset>
      <fieldset class="stack">
        <legend>Where (empty: off)</legend>
        <FieldWithError
          id="notify-webhook"
          label="Webhook URL"
          hint="POSTed as Standard Webhooks, signed with your secret below."
          error={errors["channels.webhook.url"] ?? errors["channels.webhook"]}
        >
          {(aria) => <input type="url" {...aria} {...text("webhook")} />}
        </FieldWithError>
        <p class="notify-secret">
          <span class="field-label">Webhook signing secret</span>{" "}
          {stored.webhook_secret ? (
            <code id="notify-webhook-secret">{stored.webhook_secret}</code>
          ) : (
            <span class="muted">made when you first save</span>
          )}
        </p>
        <FieldWithError
          id="notify-slack"
          label="Slack-compatible webhook URL"
          hint="An incoming webhook: Slack, Mattermost, Rocket.Chat…"
          error={errors["channels.slack.url"] ?? errors["channels.slack"]}
        >
          {(aria) => <input type="url" {...aria} {...text("slack")} />}
        </FieldWithError>
        <FieldWithError
          id="notify-email"
          label="E-mail address"
          hint="Sent through the admin's SMTP server."
          error={errors["channels.email.address"] ?? errors["channels.email"]}
        >
          {(aria) => <input type="email" {...aria} {...text("email")} />}
        </FieldWithError>
      </fieldset>
      <div class="row">
        <button type="submit" disabled={save.busy}>
          Save preferences
        </button>
      </div>
      <SavedNote message={saved} />
      <ErrorNote error={save.error} />
      {stored.updated_at ? (
        <p class="muted">Last saved {formatTime(stored.updated_at)}.</p>
      ) : (
        <p class="muted">Never saved: nothing is sent to you yet.</p>
      )}
    </form>
  );
}

const OUTCOMES: Record<string, string> = { pending: "waiting to retry", delivered: "delivered", failed: "failed", refused: "refused" };

/** The user's most recent deliveries (GET /api/users/me/notifications/deliveries). */
function Deliveries({ list }: { list: ReturnType<typeof useDeliveries> }) {
  return (
    <Panel title="Recent deliveries">
      <div class="row">
        <button type="button" onClick={() => void list.reload()} disabled={list.loading}>
          Refresh
        </button>
      </div>
      <ErrorNote error={list.error} />
      {list.data ? (
        list.data.deliveries.length ? (
          <div class="table-wrap">
            <table>
              <caption>Each message on each channel, newest first</caption>
              <thead>
                <tr>
                  <th scope="col">When</th>
                  <th scope="col">Kind</th>
                  <th scope="col">Message</th>
                  <th scope="col">Channel</th>
                  <th scope="col">Target</th>
                  <th scope="col">Outcome</th>
                  <th scope="col">Attempts</th>
                  <th scope="col">Next retry</th>
                </tr>
              </thead>
              <tbody>
                {list.data.deliveries.map((d) => (
                  <tr key={d.id}>
                    <td>{formatTime(d.event_at)}</td>
                    <td>
                      <code>{d.kind}</code>
                    </td>
                    <td>{d.subject}</td>
                    <td>{d.channel}</td>
                    <td class="notify-target">{d.target}</td>
                    <td>
                      {OUTCOMES[d.status] ?? d.status}
                      {d.last_error ? <span class="field-hint"> ({d.last_error})</span> : null}
                    </td>
                    <td>{d.attempts}</td>
                    <td>{d.status === "pending" && d.next_attempt_at ? formatTime(d.next_attempt_at) : "-"}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        ) : (
          <p>Nothing sent to you yet.</p>
        )
      ) : null}
    </Panel>
  );
}

const useDeliveries = () => useLoad(() => call(endpoints.notificationDeliveries, { query: { limit: 50 } }), []);

const smtpDraft = (smtp: SmtpSettings): Draft => ({
  host: smtp.host,
  port: String(smtp.port),
  tls: smtp.tls,
  username: smtp.username,
  from: smtp.from,
  // The stored password never comes back (the API masks it) and is never put in the page.
  password: "",
  forget: false,
});

/** The admin's SMTP settings (GET/PUT /api/admin/notifications/smtp) and a test message (POST .../smtp/test). */
function SmtpPanel() {
  const smtp = useLoad(() => call(endpoints.smtpSettings, {}), []);
  const [draft, set] = useDraft(smtp.data, smtpDraft);
  const [saved, setSaved] = useState<string | null>(null);
  const [to, setTo] = useState("");
  const save = useAction(
    (body: Record<string, unknown>) => call(endpoints.smtpSettingsUpdate, { body: body as never }),
    async () => {
      await smtp.reload();
      setSaved("SMTP settings saved.");
    },
  );
  const test = useAction((address: string) => call(endpoints.smtpTest, { body: { to: address } }));
  const [outcome, setOutcome] = useState<{ sent: boolean; error: string | null; to: string } | null>(null);
  const errors = fieldErrors(save.error, "body.");
  const testErrors = fieldErrors(test.error, "body.");
  const value = (name: string) => ({
    value: (draft[name] as string | undefined) ?? "",
    onInput: (event: { currentTarget: HTMLInputElement }) => set(name, event.currentTarget.value),
    autoComplete: "off",
  });
  return (
    <Panel title="E-mail server (SMTP, admin)">
      <ErrorNote error={smtp.error} />
      {smtp.data ? (
        <form
          class="stack settings-form"
          aria-label="SMTP settings"
          noValidate
          onSubmit={(event) => {
            event.preventDefault();
            setSaved(null);
            const port = trimmed(draft.port);
            const password = draft.forget === true ? "" : String(draft.password ?? "");
            void save.run({
              host: trimmed(draft.host),
              // Text that is no number goes as it is: the API refuses it, naming the field.
              port: port !== "" && Number.isFinite(Number(port)) ? Number(port) : port,
              tls: draft.tls,
              username: String(draft.username ?? ""),
              from: trimmed(draft.from),
              // Left out, the stored password is kept.
              ...(password || draft.forget === true ? { password } : {}),
            });
          }}
        >
          <div class="settings-grid">
            <FieldWithError id="smtp-host" label="Host" error={errors.host}>
              {(aria) => <input {...aria} {...value("host")} />}
            </FieldWithError>
            <FieldWithError id="smtp-port" label="Port" error={errors.port}>
              {(aria) => <input inputMode="numeric" {...aria} {...value("port")} />}
            </FieldWithError>
            <FieldWithError id="smtp-tls" label="Security" error={errors.tls}>
              {(aria) => (
                <select {...aria} value={draft.tls as string} onChange={(e) => set("tls", e.currentTarget.value)}>
                  {TLS_MODES.map((mode) => (
                    <option key={mode.value} value={mode.value}>
                      {mode.label}
                    </option>
                  ))}
                </select>
              )}
            </FieldWithError>
            <FieldWithError id="smtp-username" label="User" hint="Empty: no AUTH." error={errors.username}>
              {(aria) => <input {...aria} {...value("username")} />}
            </FieldWithError>
            <FieldWithError
              id="smtp-password"
              label="Password"
              hint={smtp.data.password ? "A password is stored; never shown. Leave empty to keep it." : "None stored."}
              error={errors.password}
            >
              {(aria) => <input type="password" {...aria} {...value("password")} autoComplete="new-password" />}
            </FieldWithError>
            <FieldWithError id="smtp-from" label="From address" error={errors.from}>
              {(aria) => <input type="email" {...aria} {...value("from")} />}
            </FieldWithError>
          </div>
          {smtp.data.password ? (
            <label class="check">
              <input type="checkbox" checked={draft.forget === true} onChange={(e) => set("forget", e.currentTarget.checked)} />
              <span>Remove the stored password</span>
            </label>
          ) : null}
          <div class="row">
            <button type="submit" disabled={save.busy}>
              Save SMTP settings
            </button>
          </div>
          <SavedNote message={saved} />
          <ErrorNote error={save.error} />
        </form>
      ) : null}
      {smtp.data ? <h3>Test message</h3> : null}
      {smtp.data ? (
        <form
          class="stack settings-form"
          aria-label="Test message"
          noValidate
          onSubmit={(event) => {
            event.preventDefault();
            setOutcome(null);
            const address = to.trim();
            void test.run(address).then((answer) => answer && setOutcome({ ...answer, to: address }));
          }}
        >
          <FieldWithError id="smtp-test-to" label="Send a test message to" error={testErrors.to}>
            {(aria) => <input type="email" {...aria} value={to} onInput={(e) => setTo(e.currentTarget.value)} autoComplete="off" />}
          </FieldWithError>
          <div class="row">
            <button type="submit" disabled={test.busy}>
              Send test message
            </button>
          </div>
          <p role="status" class={outcome && !outcome.sent ? "notify-failed" : "saved-note"}>
            {outcome ? (outcome.sent ? `Sent to ${outcome.to}: the server took it.` : `Not sent: ${outcome.error ?? "unknown error"}`) : ""}
          </p>
          <ErrorNote error={test.error} />
        </form>
      ) : null}
    </Panel>
  );
}

/** Notifications: what the signed-in user hears of and where, what was sent to them, and (admins) the SMTP server. */
export function NotificationsView(_props: ViewProps) {
  const deliveries = useDeliveries();
  return (
    <Page title="Notifications">
      <p>
        Choose what you want to hear of and where: a signed webhook, a Slack-compatible incoming webhook or e-mail. Nothing is sent until
        you name a channel. Each message on each channel is listed under Recent deliveries, retried with backoff when a receiver fails.
      </p>
      <Panel title="Your preferences">
        <Preferences onSaved={deliveries.reload} />
      </Panel>
      <Deliveries list={deliveries} />
      {can("admin") ? <SmtpPanel /> : null}
    </Page>
  );
}
