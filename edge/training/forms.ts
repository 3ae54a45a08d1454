import type { Database } from "../db/client";
import { ACTIVE_ENVIRONMENT_SETTING } from "../environments/activate";
import { createEnvironment, updateEnvironment } from "../environments/environments";
import { ApiError } from "../errors";
import { getSetting } from "../settings";
import { webhookConfig } from "../webhooks/lifecycle";
import { refusedTarget } from "../webhooks/targets";
import { checkOptions, TRAINING_DEFAULTS, typedOptions, type FieldProblem, type OptionMap } from "./options";

/*
 * validate and start (spec 4.2): the form's `--` options on top of the active environment's (or,
 * with none active, an inline run's), on top of the defaults.
 */

/** The environment an inline run (no active environment) is saved as, so its job has one. */
export const INLINE_ENVIRONMENT = "inline-run";

export interface Prepared {
  /** The active environment's name, or null for an inline run. */
  environment: string | null;
  activeTab: string | null;
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

async function activeEnvironment(db: Database): Promise<{ name: string; config: OptionMap } | null> {
  const found = await db.$client.execute({
    sql: "SELECT name, config FROM environments WHERE id = (SELECT CAST(value AS INTEGER) FROM settings WHERE key = ?)",
    args: [ACTIVE_ENVIRONMENT_SETTING],
  });
  const row = found.rows[0];
  return row ? { name: String(row.name), config: JSON.parse(String(row.config ?? "{}")) as OptionMap } : null;
}

/** The body's fields (a form or a JSON object) merged and checked; nothing is saved. */
export async function prepareTraining(db: Database, body: Record<string, unknown>): Promise<Prepared> {
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
  const environment = await activeEnvironment(db);
  const merged: OptionMap = { ...TRAINING_DEFAULTS, ...(environment?.config ?? {}), ...typed.options };
  const checked = checkOptions(merged, environment === null);
  problems.push(...checked.problems);
  // Receivers this service would refuse to call (SSRF guard) are a problem now, not a surprise later.
  const { allow_private_targets } = await getSetting(db, "webhooks");
  for (const target of webhookConfig(checked.options).targets) {
    const refused = refusedTarget(target.url, allow_private_targets);
    if (refused) problems.push({ field: "--webhook_config", message: `${target.url}: ${refused}` });
  }
  return { environment: environment?.name ?? null, activeTab, options: checked.options, problems };
}

/** Writes the merged options as the active configuration; returns the environment the job runs. */
export async function saveActiveConfiguration(db: Database, prepared: Prepared, userId: number): Promise<string> {
  if (prepared.environment !== null) {
    await updateEnvironment(db, prepared.environment, { config: prepared.options });
    return prepared.environment;
  }
  try {
    await updateEnvironment(db, INLINE_ENVIRONMENT, { config: prepared.options });
  } catch (error) {
    if (!(error instanceof ApiError) || error.status !== 404) throw error;
    await createEnvironment(db, { name: INLINE_ENVIRONMENT, description: "Options of the last inline run (POST /api/training/start without an active environment)" }, userId);
    await updateEnvironment(db, INLINE_ENVIRONMENT, { config: prepared.options });
  }
  return INLINE_ENVIRONMENT;
}
