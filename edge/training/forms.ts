import { adminOnlyOptionsIn } from "../../shared/admin-options";
import { keepMaskedSecrets, MaskWithoutValue } from "../../shared/secrets-mask";
import type { Database } from "../db/client";
import { createEnvironment, updateEnvironment } from "../environments/environments";
import { inlineEnvironmentName } from "../environments/names";
import type { Actor } from "../environments/ownership";
import { ApiError } from "../errors";
import { getSetting } from "../settings";
import { webhookConfig } from "../webhooks/lifecycle";
import { refusedTarget } from "../webhooks/targets";
import { checkOptions, TRAINING_DEFAULTS, typedOptions, type FieldProblem, type OptionMap } from "./options";

/*
 * validate and start (spec 4.2): the form's `--` options on top of the caller's active
 * environment's (or, with none active, an inline run's), on top of the defaults.
 */

export interface Prepared {
  /** The caller's active environment's name, or null for an inline run. */
  environment: string | null;
  activeTab: string | null;
  /** The merged options with their real values: mask them before showing them. */
  options: OptionMap;
  problems: FieldProblem[];
}

/** The form's fields as text: `--` options and `__active_tab__`; files and objects are refused. */
function formFields(raw: Record<string, unknown>): Record<string, string> {
  const fields: Record<string, string> = {};
  for (const [name, value] of Object.entries(raw)) {
    if (typeof value === "object" && value !== null) throw new ApiError(422, "invalid_request", `${name} must be a plain value, not a file or an object`, [{ path: `form.${name}`, message: "a plain value" }]);
    fields[name] = value === null ? "" : String(value);
  }
  return fields;
}

async function activeEnvironment(db: Database, userId: number): Promise<{ name: string; config: OptionMap } | null> {
  const found = await db.$client.execute({
    sql: "SELECT e.name, e.config FROM active_environments a JOIN environments e ON e.id = a.environment_id WHERE a.user_id = ?",
    args: [userId],
  });
  const row = found.rows[0];
  return row ? { name: String(row.name), config: JSON.parse(String(row.config ?? "{}")) as OptionMap } : null;
}

/**
 * The body's fields (a form or a JSON object) merged onto the caller's active environment and
 * checked; nothing is saved. A field sent as the mask keeps the environment's value; an
 * admin-only option from anyone else is a problem.
 *
 * @example
 * const { options, problems } = await prepareTraining(db, { "--max_train_steps": "100" }, { id: 7, level: "researcher" });
 */
export async function prepareTraining(db: Database, body: Record<string, unknown>, actor: Actor): Promise<Prepared> {
  const fields = formFields(body);
  const problems: FieldProblem[] = [];
  const activeTab = fields.__active_tab__ ?? null;
  const optionFields: Record<string, string> = {};
  for (const [name, value] of Object.entries(fields)) {
    if (name === "__active_tab__") continue;
    if (!name.startsWith("--")) problems.push({ field: name, message: 'not an option: option fields are named with their "--" prefix' });
    else optionFields[name] = value;
  }
  const typed = typedOptions(optionFields);
  problems.push(...typed.problems);
  const environment = await activeEnvironment(db, actor.id);
  let formOptions = typed.options;
  try {
    formOptions = keepMaskedSecrets(typed.options, environment?.config);
  } catch (error) {
    if (!(error instanceof MaskWithoutValue)) throw error;
    problems.push({ field: error.path, message: "the mask stands for a stored value, and the active environment has none here: send the real value" });
  }
  const merged: OptionMap = { ...TRAINING_DEFAULTS, ...(environment?.config ?? {}), ...formOptions };
  const checked = checkOptions(merged, environment === null);
  problems.push(...checked.problems);
  if (actor.level !== "admin") for (const option of adminOnlyOptionsIn(checked.options)) problems.push({ field: option, message: "may be set only by an admin" });
  // Receivers this service would refuse to call (SSRF guard) are a problem now, not a surprise later.
  const { allow_private_targets } = await getSetting(db, "webhooks");
  for (const target of webhookConfig(checked.options).targets) {
    const refused = refusedTarget(target.url, allow_private_targets);
    if (refused) problems.push({ field: "--webhook_config", message: `${target.url}: ${refused}` });
  }
  return { environment: environment?.name ?? null, activeTab, options: checked.options, problems };
}

/**
 * Writes the merged options as the caller's active configuration (their active environment, or
 * their own inline-run environment); returns the environment the job runs.
 *
 * @example
 * const environment = await saveActiveConfiguration(db, prepared, { id: 7, level: "researcher" }); // "inline-run-7"
 */
export async function saveActiveConfiguration(db: Database, prepared: Prepared, actor: Actor): Promise<string> {
  if (prepared.environment !== null) {
    await updateEnvironment(db, prepared.environment, { config: prepared.options }, actor);
    return prepared.environment;
  }
  const inline = inlineEnvironmentName(actor.id);
  try {
    await updateEnvironment(db, inline, { config: prepared.options }, actor);
  } catch (error) {
    if (!(error instanceof ApiError) || error.status !== 404) throw error;
    await createEnvironment(db, { name: inline, description: "Options of your last inline run (POST /api/training/start without an active environment)" }, actor.id);
    await updateEnvironment(db, inline, { config: prepared.options }, actor);
  }
  return inline;
}
