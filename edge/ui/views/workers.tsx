import { useState } from "preact/hooks";
import type { z } from "zod";
import type { Worker, WorkerCreated } from "../../../shared/schemas/workers";
import { call, endpoints } from "../api";
import { ErrorNote } from "../components/error-note";
import { Field, formValues } from "../components/field";
import { formatTime } from "../components/format";
import { Page, Panel } from "../components/page";
import { useAction, useLoad } from "../components/use-load";
import { href } from "../router";
import type { ViewProps } from "../view-props";
import { ConfirmButton, OnceSecret } from "../components/controls";
import { Labels, WorkerStatus, Trainers } from "./system-parts";
import "./system.css";

type Created = z.output<typeof WorkerCreated>;

/** How to start the runner with a token just shown (README: "Running a real trainer on a GPU box"). */
function RunnerCommand({ token }: { token: string }) {
  return (
    <>
      <p>On the GPU box (a checkout of this repository, after npm ci):</p>
      <pre class="secret" tabIndex={0} aria-label="Runner command">
        <code>{`RUNNER_TOKEN=${token} npm run runner -- start --url ${location.origin} --label gpu=...`}</code>
      </pre>
    </>
  );
}

/** One worker's row: replace its token (the new one shown once, above the table) or remove it. */
function WorkerRow({
  worker,
  onToken,
  onRemoved,
}: {
  worker: z.output<typeof Worker>;
  onToken: (w: Created) => void;
  onRemoved: () => unknown;
}) {
  const rotate = useAction(() => call(endpoints.workerRotateToken, { params: { id: worker.id } }), onToken);
  const remove = useAction(() => call(endpoints.workerDelete, { params: { id: worker.id } }), onRemoved);
  return (
    <tr>
      <th scope="row">{worker.name}</th>
      <td>{worker.role === "local" ? "local box" : "remote"}</td>
      <td>
        <WorkerStatus status={worker.status} />
      </td>
      <td>
        <Labels labels={worker.labels} />
      </td>
      <td>{worker.gpu_count ? `${worker.gpu_count} × ${worker.gpu_name ?? "GPU"}` : "none"}</td>
      <td>{formatTime(worker.last_heartbeat)}</td>
      <td>
        <Trainers trainers={worker.trainers} />
      </td>
      <td>
        {worker.running_jobs.length
          ? worker.running_jobs.map((id) => (
              <div key={id}>
                <a href={href("jobs", id)}>{id}</a>
              </div>
            ))
          : "-"}
      </td>
      <td>
        <div class="actions-cell">
          <div class="confirm">
            <button type="button" onClick={() => void rotate.run()} disabled={rotate.busy} aria-label={`Replace token of ${worker.name}`}>
              Replace token
            </button>
            <ErrorNote error={rotate.error} />
          </div>
          <ConfirmButton
            label="Remove"
            name={`Remove ${worker.name}`}
            question={`Remove ${worker.name}? Its token stops working and its running jobs go back to the queue.`}
            confirmLabel="Yes, remove"
            onConfirm={remove.run}
            busy={remove.busy}
            error={remove.error}
          />
        </div>
      </td>
    </tr>
  );
}

/** Workers (admin): the GPU boxes with their tokens: create (token shown once), replace a token, remove. */
export function WorkersView(_props: ViewProps) {
  const list = useLoad(() => call(endpoints.workerList, {}), []);
  const [shown, setShown] = useState<{ worker: Created; why: "created" | "replaced" } | null>(null);
  const [removed, setRemoved] = useState<string | null>(null);
  const create = useAction(
    (name: string) => call(endpoints.workerCreate, { body: { name } }),
    async (worker) => {
      setShown({ worker, why: "created" });
      setRemoved(null);
      await list.reload();
    },
  );
  return (
    <Page title="Workers">
      <Panel title="Add a worker">
        <form
          class="row"
          onSubmit={async (event) => {
            event.preventDefault();
            const form = event.currentTarget;
            if (await create.run(formValues(form).name ?? "")) form.reset();
          }}
        >
          <Field label="Name" hint="1 to 64 letters, digits, '.', '_' or '-'">
            <input name="name" required maxLength={64} autoComplete="off" />
          </Field>
          <button type="submit" class="primary" disabled={create.busy}>
            Create worker
          </button>
        </form>
        <ErrorNote error={create.error} />
      </Panel>
      {shown ? (
        <OnceSecret
          title={`${shown.why === "created" ? "The token of the new worker" : "The new token of"} ${shown.worker.name}.`}
          value={shown.worker.token}
        >
          {shown.why === "replaced" ? <p>The old token is refused from now on: restart the runner with this one.</p> : null}
          <RunnerCommand token={shown.worker.token} />
          <button type="button" onClick={() => setShown(null)}>
            I have copied it
          </button>
        </OnceSecret>
      ) : null}
      {removed ? (
        <p class="notice" role="status">
          Removed {removed}.
        </p>
      ) : null}
      <Panel title="Workers and GPU boxes">
        <ErrorNote error={list.error} />
        {list.data ? (
          list.data.workers.length ? (
            <div class="table-wrap">
              <table class="system-table">
                <thead>
                  <tr>
                    <th scope="col">Name</th>
                    <th scope="col">Role</th>
                    <th scope="col">Status</th>
                    <th scope="col">Labels</th>
                    <th scope="col">GPUs</th>
                    <th scope="col">Last heartbeat</th>
                    <th scope="col">Trainers</th>
                    <th scope="col">Running jobs</th>
                    <th scope="col">Actions</th>
                  </tr>
                </thead>
                <tbody>
                  {list.data.workers.map((w) => (
                    <WorkerRow
                      key={w.id}
                      worker={w}
                      onToken={(worker) => {
                        setShown({ worker, why: "replaced" });
                        void list.reload();
                      }}
                      onRemoved={async () => {
                        setRemoved(w.name);
                        if (shown?.worker.id === w.id) setShown(null);
                        await list.reload();
                      }}
                    />
                  ))}
                </tbody>
              </table>
            </div>
          ) : (
            <p class="muted">No workers yet.</p>
          )
        ) : list.error ? null : (
          <p aria-busy="true">Loading…</p>
        )}
      </Panel>
    </Page>
  );
}
