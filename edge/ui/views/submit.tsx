import { useState } from "preact/hooks";
import type { z } from "zod";
import type { LocalSubmit, LocalSubmitResult } from "../../../shared/schemas/queue";
import { call, endpoints, ServiceError } from "../api";
import { ErrorNote } from "../components/error-note";
import { Field } from "../components/field";
import { Page, Panel } from "../components/page";
import { useAction, useLoad } from "../components/use-load";
import { href, navigate } from "../router";
import { can } from "../session";
import type { ViewProps } from "../view-props";
import "./queue.css";

interface Form {
  config_name: string;
  name: string;
  target: "auto" | "local" | "worker";
  any_gpu: boolean;
  no_wait: boolean;
  labels: string;
  priority: string;
}

const EMPTY: Form = { config_name: "", name: "", target: "auto", any_gpu: false, no_wait: false, labels: "", priority: "" };

/** `gpu=a100*, zone=eu` as worker_labels; a malformed pair is a 422-like error on the field. */
function parseLabels(text: string): Record<string, string> | undefined {
  const pairs = text
    .split(",")
    .map((p) => p.trim())
    .filter(Boolean);
  if (!pairs.length) return undefined;
  const labels: Record<string, string> = {};
  for (const pair of pairs) {
    const at = pair.indexOf("=");
    if (at < 1)
      throw new ServiceError(422, "invalid_labels", "Worker labels are key=value pairs separated by commas", [
        { path: "worker_labels", message: `"${pair}" has no key=value` },
      ]);
    labels[pair.slice(0, at).trim()] = pair.slice(at + 1).trim();
  }
  return labels;
}

function requestOf(form: Form, dryRun: boolean): z.input<typeof LocalSubmit> {
  const labels = parseLabels(form.labels);
  return {
    config_name: form.config_name,
    target: form.target,
    any_gpu: form.any_gpu,
    no_wait: form.no_wait,
    ...(labels ? { worker_labels: labels } : {}),
    ...(form.name.trim() ? { metadata: { run_name: form.name.trim() } } : {}),
    dry_run: dryRun,
  };
}

/** Submit a job: an environment and where it may run; the dry run's answer first, then the real submission. */
export function SubmitView(_props: ViewProps) {
  const [form, setForm] = useState<Form>(EMPTY);
  // The dry run's answer, and the form it answered: Submit is offered only for that form.
  const [checked, setChecked] = useState<{ form: Form; answer: z.output<typeof LocalSubmitResult> } | null>(null);
  const [outcome, setOutcome] = useState<z.output<typeof LocalSubmitResult> | null>(null);
  const environments = useLoad(() => call(endpoints.configList, {}), []);
  const chosen = useLoad(
    () => (form.config_name ? call(endpoints.configGet, { params: { name: form.config_name } }) : Promise.resolve(null)),
    [form.config_name],
  );

  const check = useAction(
    () => call(endpoints.queueSubmit, { body: requestOf(form, true) }),
    (answer) => setChecked({ form, answer }),
  );
  const submit = useAction(
    async () => {
      const answer = await call(endpoints.queueSubmit, { body: requestOf(form, false) });
      if (answer.job_id && form.priority !== "" && can("lead"))
        await call(endpoints.queuePriority, { params: { job_id: answer.job_id }, body: { priority: Number(form.priority) } });
      return answer;
    },
    (answer) => (answer.job_id ? navigate(href("jobs", answer.job_id)) : setOutcome(answer)),
  );

  const change = (patch: Partial<Form>) => {
    setForm({ ...form, ...patch });
    setChecked(null);
    setOutcome(null);
    check.clear();
    submit.clear();
  };
  const upToDate = checked !== null && checked.form === form;
  const gpus = chosen.data?.config["--num_processes"];
  const devices = chosen.data?.config["--accelerate_visible_devices"];

  return (
    <Page title="Submit a job">
      <Panel title="What to run" id="submit-form">
        <form
          class="stack submit-form"
          onSubmit={(event) => {
            event.preventDefault();
            void check.run();
          }}
        >
          <ErrorNote error={environments.error} />
          <Field label="Environment" hint="Its options decide what the job runs and how many GPUs it needs.">
            <select required value={form.config_name} onChange={(event) => change({ config_name: event.currentTarget.value })}>
              <option value="">Choose an environment</option>
              {environments.data?.environments.map((env) => (
                <option key={env.name} value={env.name}>
                  {env.name}
                  {env.owner ? ` (${env.owner})` : ""}
                </option>
              ))}
            </select>
          </Field>
          {environments.data?.environments.length === 0 ? (
            <p class="notice">No environment exists yet: create one from an example below.</p>
          ) : null}
          {chosen.data ? (
            <p class="muted" aria-live="polite">
              Needs{" "}
              {gpus === undefined || gpus === null
                ? "1 GPU"
                : Number(gpus) === 0
                  ? "no GPU: a CPU job"
                  : `${String(gpus)} GPU${Number(gpus) === 1 ? "" : "s"}`}
              {devices !== undefined && devices !== null && devices !== "" ? `, preferably devices ${String(devices)}` : ""}. From the
              environment's <code>--num_processes</code> and <code>--accelerate_visible_devices</code>.
            </p>
          ) : null}
          <ErrorNote error={chosen.error} />
          <Field label="Name" hint="Optional; shown in the queue (metadata.run_name).">
            <input value={form.name} maxLength={200} autoComplete="off" onInput={(event) => change({ name: event.currentTarget.value })} />
          </Field>
          <Field label="Where" hint="Auto tries remote workers first, then this service's own GPUs.">
            <select value={form.target} onChange={(event) => change({ target: event.currentTarget.value as Form["target"] })}>
              <option value="auto">Auto</option>
              <option value="local">Local GPUs only</option>
              <option value="worker">Remote workers only</option>
            </select>
          </Field>
          <Field label="Worker labels" hint="key=value pairs separated by commas; * in a value matches anything (gpu=a100*).">
            <input value={form.labels} autoComplete="off" onInput={(event) => change({ labels: event.currentTarget.value })} />
          </Field>
          <label class="row">
            <input type="checkbox" checked={form.any_gpu} onChange={(event) => change({ any_gpu: event.currentTarget.checked })} />
            Any free GPUs (ignore the environment's preferred devices)
          </label>
          <label class="row">
            <input type="checkbox" checked={form.no_wait} onChange={(event) => change({ no_wait: event.currentTarget.checked })} />
            Do not queue: refuse at once when no capacity is free
          </label>
          {can("lead") ? (
            <Field label="Priority" hint="Optional override, 0 to 100 (admin level is 30); set right after submitting.">
              <input
                type="number"
                min={0}
                max={100}
                step={1}
                value={form.priority}
                onInput={(event) => change({ priority: event.currentTarget.value })}
              />
            </Field>
          ) : null}
          <div class="row">
            <button type="submit" disabled={check.busy || !form.config_name}>
              Check
            </button>
            <button type="button" class="primary" disabled={!upToDate || submit.busy} onClick={() => void submit.run()}>
              Submit
            </button>
          </div>
          {!upToDate ? <p class="muted">Check first: it says what would happen, and stores nothing.</p> : null}
          <ErrorNote error={check.error} />
          <ErrorNote error={submit.error} />
        </form>
      </Panel>
      <FromExample
        onCreated={async (name) => {
          await environments.reload();
          change({ config_name: name });
        }}
      />
      {upToDate ? <Answer title="If you submit now" answer={checked.answer} /> : null}
      {outcome ? <Answer title="Not submitted" answer={outcome} /> : null}
    </Page>
  );
}

/** A new environment copied from a shipped example (`demo`: the built-in demo trainer on the CPU). */
function FromExample({ onCreated }: { onCreated: (name: string) => Promise<void> }) {
  const examples = useLoad(() => call(endpoints.configExamples, {}), []);
  const [example, setExample] = useState("demo");
  const [name, setName] = useState("");
  const create = useAction(
    () => call(endpoints.configCreate, { body: { name: name || example, from_example: example } }),
    (env) => onCreated(env.name),
  );
  return (
    <Panel title="Create from an example" id="from-example">
      <form
        class="row"
        onSubmit={(event) => {
          event.preventDefault();
          void create.run();
        }}
      >
        <Field label="Example">
          <select value={example} onChange={(event) => setExample(event.currentTarget.value)}>
            {examples.data?.examples.map((e) => (
              <option key={e.name} value={e.name}>
                {e.name}
              </option>
            ))}
          </select>
        </Field>
        <Field label="New environment's name" hint="Default: the example's name.">
          <input value={name} autoComplete="off" onInput={(event) => setName(event.currentTarget.value)} />
        </Field>
        <button type="submit" disabled={create.busy || !examples.data}>
          Create from example
        </button>
      </form>
      <ErrorNote error={examples.error} />
      <ErrorNote error={create.error} />
    </Panel>
  );
}

function Answer({ title, answer }: { title: string; answer: z.output<typeof LocalSubmitResult> }) {
  return (
    <Panel title={title} id="submit-answer">
      <p role="status">{answer.message}</p>
      <dl class="submit-answer">
        <dt>Outcome</dt>
        <dd>
          <span class={`badge status-${answer.status === "queued" ? "pending" : answer.status}`}>{answer.status}</span>
        </dd>
        {answer.allocated_gpus?.length ? (
          <>
            <dt>GPUs</dt>
            <dd>{answer.allocated_gpus.join(", ")}</dd>
          </>
        ) : null}
        {answer.worker_id !== null ? (
          <>
            <dt>Worker</dt>
            <dd>{answer.worker_id}</dd>
          </>
        ) : null}
        {answer.queue_position !== null ? (
          <>
            <dt>Position</dt>
            <dd>{answer.queue_position}</dd>
          </>
        ) : null}
        {answer.wait_reason ? (
          <>
            <dt>Why it would wait</dt>
            <dd>{answer.wait_reason.replaceAll("_", " ")}</dd>
          </>
        ) : null}
      </dl>
    </Panel>
  );
}
