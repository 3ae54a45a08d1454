import { useState } from "preact/hooks";
import type { z } from "zod";
import type { ApprovalRules, ConcurrencySettings } from "../../../shared/schemas/queue";
import { call, endpoints } from "../api";
import { ErrorNote } from "../components/error-note";
import { Field } from "../components/field";
import { Page, Panel } from "../components/page";
import { useAction, useLoad } from "../components/use-load";
import type { ViewProps } from "../view-props";
import { changedOnly, CheckBox, numberOrNull, numberText, SavedNote, TextInput, useDraft, type Draft } from "./settings-form";

type Limits = z.output<typeof ConcurrencySettings>;
type Rules = z.output<typeof ApprovalRules>;

/** The concurrency limits (README "Scheduling"): every field, saved together; only changed fields are sent. */
function ConcurrencyForm() {
  const loaded = useLoad(() => call(endpoints.concurrency, {}), []);
  const [saved, setSaved] = useState<string | null>(null);
  const [draft, set] = useDraft(loaded.data, (limits: Limits) => ({
    max_concurrent: numberText(limits.max_concurrent),
    user_max_concurrent: numberText(limits.user_max_concurrent),
    team_max_concurrent: numberText(limits.team_max_concurrent),
    enable_fair_share: limits.enable_fair_share,
    local_job_max_concurrent: numberText(limits.local_job_max_concurrent),
    local_gpu_max_concurrent: numberText(limits.local_gpu_max_concurrent),
    starvation_threshold_minutes: numberText(limits.starvation_threshold_minutes),
    worker_heartbeat_timeout_seconds: numberText(limits.worker_heartbeat_timeout_seconds),
  }));
  const save = useAction(
    (body: Partial<Limits>) => call(endpoints.concurrencyUpdate, { body }),
    async () => {
      await loaded.reload();
      setSaved("Limits saved; the scheduler applies them now.");
    },
  );
  if (loaded.error) return <ErrorNote error={loaded.error} />;
  if (!loaded.data) return <p aria-busy="true">Loading…</p>;
  const body = (d: Draft) =>
    changedOnly(loaded.data!, {
      max_concurrent: numberOrNull(d.max_concurrent),
      user_max_concurrent: numberOrNull(d.user_max_concurrent),
      team_max_concurrent: numberOrNull(d.team_max_concurrent),
      enable_fair_share: d.enable_fair_share === true,
      local_job_max_concurrent: numberOrNull(d.local_job_max_concurrent),
      local_gpu_max_concurrent: numberOrNull(d.local_gpu_max_concurrent),
      starvation_threshold_minutes: numberOrNull(d.starvation_threshold_minutes),
      worker_heartbeat_timeout_seconds: numberOrNull(d.worker_heartbeat_timeout_seconds),
    } as Partial<Limits>);
  const number = (name: string) => <TextInput draft={draft} set={set} name={name} type="number" min={0} step="1" inputMode="numeric" />;
  return (
    <form
      class="stack settings-form"
      aria-label="Concurrency limits"
      // The service checks the values and names each bad one: its answer is shown beside the form.
      noValidate
      onSubmit={(event) => {
        event.preventDefault();
        setSaved(null);
        const changes = body(draft);
        if (Object.keys(changes).length === 0) setSaved("Nothing changed.");
        else void save.run(changes);
      }}
    >
      <fieldset>
        <legend>Cloud jobs</legend>
        <div class="settings-grid">
          <Field label="Running cloud jobs, in all">{number("max_concurrent")}</Field>
          <Field label="Running cloud jobs per user">{number("user_max_concurrent")}</Field>
          <Field label="Running jobs per team" hint="Applies only with team limits on.">
            {number("team_max_concurrent")}
          </Field>
          <CheckBox draft={draft} set={set} name="enable_fair_share" label="Team limits (fair share)" />
        </div>
      </fieldset>
      <fieldset>
        <legend>The local box</legend>
        <div class="settings-grid">
          <Field label="Local jobs at once">{number("local_job_max_concurrent")}</Field>
          <Field label="GPUs used by local jobs" hint="Empty: unlimited.">
            {number("local_gpu_max_concurrent")}
          </Field>
        </div>
      </fieldset>
      <fieldset>
        <legend>Scheduler</legend>
        <div class="settings-grid">
          <Field
            label="Starvation threshold (minutes)"
            hint="Each full threshold a job waits adds 10 to its priority, and a job that has waited it gets a reservation; 0 turns both off."
          >
            <TextInput draft={draft} set={set} name="starvation_threshold_minutes" type="number" min={0} step="any" inputMode="decimal" />
          </Field>
          <Field label="Worker heartbeat timeout (seconds)" hint="A worker silent this long goes offline and its jobs are retried.">
            {number("worker_heartbeat_timeout_seconds")}
          </Field>
        </div>
      </fieldset>
      <div class="row">
        <button type="submit" class="primary" disabled={save.busy}>
          Save limits
        </button>
        <SavedNote message={saved} />
      </div>
      <ErrorNote error={save.error} />
    </form>
  );
}

/** When submissions wait for an admin's approval. */
function ApprovalRulesForm() {
  const loaded = useLoad(() => call(endpoints.approvalRules, {}), []);
  const [saved, setSaved] = useState<string | null>(null);
  const [draft, set] = useDraft(loaded.data, (rules: Rules) => ({
    cloud_cost_threshold: numberText(rules.cloud_cost_threshold),
    local_gpu_threshold: numberText(rules.local_gpu_threshold),
  }));
  const save = useAction(
    (body: Partial<Rules>) => call(endpoints.approvalRulesUpdate, { body }),
    async () => {
      await loaded.reload();
      setSaved("Approval rules saved; they apply to later submissions.");
    },
  );
  if (loaded.error) return <ErrorNote error={loaded.error} />;
  if (!loaded.data) return <p aria-busy="true">Loading…</p>;
  return (
    <form
      class="stack settings-form"
      aria-label="Approval rules"
      noValidate
      onSubmit={(event) => {
        event.preventDefault();
        setSaved(null);
        const changes = changedOnly(loaded.data!, {
          cloud_cost_threshold: numberOrNull(draft.cloud_cost_threshold),
          local_gpu_threshold: numberOrNull(draft.local_gpu_threshold),
        });
        if (Object.keys(changes).length === 0) setSaved("Nothing changed.");
        else void save.run(changes);
      }}
    >
      <div class="settings-grid">
        <Field label="Cloud cost threshold (USD)" hint="Cloud jobs estimated at this much or more need approval. Empty: never.">
          <TextInput draft={draft} set={set} name="cloud_cost_threshold" type="number" min={0} step="0.01" inputMode="decimal" />
        </Field>
        <Field label="Local GPU threshold" hint="Local jobs asking for more GPUs than this need approval. Empty: never.">
          <TextInput draft={draft} set={set} name="local_gpu_threshold" type="number" min={0} step="1" inputMode="numeric" />
        </Field>
      </div>
      <div class="row">
        <button type="submit" class="primary" disabled={save.busy}>
          Save approval rules
        </button>
        <SavedNote message={saved} />
      </div>
      <ErrorNote error={save.error} />
    </form>
  );
}

/** Limits and approvals (admin): the queue's concurrency limits and the approval rules. */
export function LimitsView(_props: ViewProps) {
  return (
    <Page title="Limits and approvals">
      <Panel title="Concurrency limits" id="concurrency">
        <ConcurrencyForm />
      </Panel>
      <Panel title="Approval rules" id="approval-rules">
        <ApprovalRulesForm />
      </Panel>
    </Page>
  );
}
