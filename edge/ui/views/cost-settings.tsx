import { useState } from "preact/hooks";
import type { Budgets, GpuPrices } from "../../../shared/schemas/spend";
import { call, endpoints } from "../api";
import { ErrorNote } from "../components/error-note";
import { Field, formValues } from "../components/field";
import { Panel } from "../components/page";
import { useAction, useLoad } from "../components/use-load";
import { SavedNote } from "./settings-form";

/** A table as lines of `name = amount`. */
const linesOf = (table: Record<string, number>) =>
  Object.entries(table)
    .map(([name, amount]) => `${name} = ${amount}`)
    .join("\n");

/**
 * Lines of `name = amount` as the update of `before`: each line's entry set (an amount that is not
 * a number is sent as written, for the API to refuse and name), each entry no longer listed null.
 */
function tableUpdate(text: string, before: Record<string, number>): Record<string, number | null> {
  const update: Record<string, number | null> = {};
  for (const line of text.split("\n")) {
    const at = line.lastIndexOf("=");
    if (!line.trim()) continue;
    const name = (at < 0 ? line : line.slice(0, at)).trim();
    const amount = at < 0 ? "" : line.slice(at + 1).trim();
    update[name] = (amount === "" || Number.isNaN(Number(amount)) ? amount : Number(amount)) as number;
  }
  for (const name of Object.keys(before)) if (!(name in update)) update[name] = null;
  return update;
}

const amount = (text: string) => (text.trim() === "" || Number.isNaN(Number(text)) ? text : Number(text)) as number;

/** The admin's GPU-hour prices and budgets (PUT /api/admin/gpu-prices, PUT /api/admin/budgets), saved through the API, which checks them. */
export function SpendSettings({ onSaved }: { onSaved: () => unknown }) {
  const prices = useLoad(() => call(endpoints.gpuPrices, {}), []);
  const budgets = useLoad(() => call(endpoints.budgets, {}), []);
  const [saved, setSaved] = useState<string | null>(null);
  const savePrices = useAction(
    (body: Record<string, unknown>) => call(endpoints.gpuPricesUpdate, { body: body as never }),
    async () => {
      await prices.reload();
      setSaved("Prices saved.");
      await onSaved();
    },
  );
  const saveBudgets = useAction(
    (body: Record<string, unknown>) => call(endpoints.budgetsUpdate, { body: body as never }),
    async () => {
      await budgets.reload();
      setSaved("Budgets saved.");
    },
  );
  return (
    <Panel title="Prices and budgets (admin)">
      <SavedNote message={saved} />
      <ErrorNote error={prices.error ?? budgets.error} />
      {prices.data ? <h3>GPU-hour prices</h3> : null}
      {prices.data ? (
        <form
          class="stack settings-form"
          aria-label="GPU-hour prices"
          noValidate
          onSubmit={(event) => {
            event.preventDefault();
            setSaved(null);
            const v = formValues(event.currentTarget);
            const p: GpuPrices = prices.data!;
            void savePrices.run({
              default_usd_per_gpu_hour: amount(v.default ?? ""),
              workers: tableUpdate(v.workers ?? "", p.workers),
              gpu_models: tableUpdate(v.models ?? "", p.gpu_models),
            });
          }}
        >
          <Field label="Default price (USD per GPU-hour)">
            <input name="default" inputMode="decimal" defaultValue={String(prices.data.default_usd_per_gpu_hour)} />
          </Field>
          <Field label="By box" hint="One per line: box name = USD per GPU-hour; a box's price wins over its GPU model's">
            <textarea name="workers" rows={3} defaultValue={linesOf(prices.data.workers)} />
          </Field>
          <Field label="By GPU model" hint="One per line: the model as nvidia-smi names it = USD per GPU-hour">
            <textarea name="models" rows={3} defaultValue={linesOf(prices.data.gpu_models)} />
          </Field>
          <button type="submit" disabled={savePrices.busy}>
            Save prices
          </button>
          <ErrorNote error={savePrices.error} />
        </form>
      ) : null}
      {budgets.data ? <h3>Budgets</h3> : null}
      {budgets.data ? (
        <form
          class="stack settings-form"
          aria-label="Budgets"
          noValidate
          onSubmit={(event) => {
            event.preventDefault();
            setSaved(null);
            const v = formValues(event.currentTarget);
            const b: Budgets = budgets.data!;
            void saveBudgets.run({
              period: v.period,
              warn_at_percent: amount(v.warn ?? ""),
              on_exceeded: v.on_exceeded,
              users: tableUpdate(v.users ?? "", b.users),
              teams: tableUpdate(v.teams ?? "", b.teams),
            });
          }}
        >
          <Field label="Budget period">
            <select name="period">
              {(["day", "week", "month"] as const).map((p) => (
                <option key={p} value={p} selected={budgets.data!.period === p}>
                  {p}
                </option>
              ))}
            </select>
          </Field>
          <Field label="Warn at (% used)">
            <input name="warn" inputMode="numeric" defaultValue={String(budgets.data.warn_at_percent)} />
          </Field>
          <Field label="When a budget is used up">
            <select name="on_exceeded">
              <option value="block" selected={budgets.data.on_exceeded === "block"}>
                refuse new jobs
              </option>
              <option value="require_approval" selected={budgets.data.on_exceeded === "require_approval"}>
                new jobs wait for an admin's approval
              </option>
            </select>
          </Field>
          <Field label="By user" hint="One per line: user id = USD per period">
            <textarea name="users" rows={3} defaultValue={linesOf(budgets.data.users)} />
          </Field>
          <Field label="By team" hint="One per line: team = USD per period">
            <textarea name="teams" rows={3} defaultValue={linesOf(budgets.data.teams)} />
          </Field>
          <button type="submit" disabled={saveBudgets.busy}>
            Save budgets
          </button>
          <ErrorNote error={saveBudgets.error} />
        </form>
      ) : null}
    </Panel>
  );
}
