import { adminOnlyOptionsIn } from "../../shared/admin-options";
import { keepMaskedSecrets, MaskWithoutValue } from "../../shared/secrets-mask";
import type { Database } from "../db/client";
import { createEnvironment, updateEnvironment } from "../environments/environments";
import { inlineEnvironmentName } from "../environments/names";
import type { Actor } from "../environments/ownership";
import { ApiError } from "../errors";
import { getSetting } from "../settings-store";
import { webhookConfig } from "../webhooks/lifecycle";
import { refusedTarget } from "../webhooks/targets";
import { checkOptions, savedOptionProblems, TRAINING_DEFAULTS, typedOptions, type FieldProblem, type OptionMap } from "./options";

/*
 * validate and start (POST /api/training/validate and /start): the form is the whole
 * configuration. Its `--` options on top of the defaults are what start runs, whatever
 * environment the caller activated before, so a verdict depends on the form alone. Start then writes them to the caller's active environment
 * (replacing its options), or with none active to their own inline-run environment, and submits
 * that. The one thing read from that environment is the value a masked secret stands for: a form
 * filled from GET /api/configs/{name} carries `********` where a secret is stored.
 */

export interface Prepared {
  /** The environment start writes to: the caller's active one, or their inline-run-<id>. */
  environment: string;
  /** Whether that environment exists yet (an inline-run one is created by the first start). */
  exists: boolean;
  activeTab: string | null;
  /** The options with their real values: mask them before showing them. */
  options: OptionMap;
  problems: FieldProblem[];
}

/** The form's fields as text: `--` options and `__active_tab__`; files and objects are refused. */
function formFields(raw: Record<string, unknown>): Record<string, string> {
  const fields: Record<string, string> = {};
  for (const [name, value] of Object.entries(raw)) {
    if (typeof value === "object" && value !== null)
      throw new ApiError(422, "invalid_request", `${name} must be a plain value, not a file or an object`, [
        { path: `form.${name}`, message: "a plain value" },
      ]);
    fields[name] = value === null ? "" : String(value);
  }
  return fields;
}

/** Where start writes: the caller's active environment, else their inline-run one; its stored options (null: not created yet). */
async function targetEnvironment(db: Database, userId: number): Promise<{ name: string; config: OptionMap | null }> {
  const inline = inlineEnvironmentName(userId);
  const found = await db.$client.execute({
    sql: `SELECT e.name, e.config, 0 AS rank FROM active_environments a JOIN environments e ON e.id = a.environment_id WHERE a.user_id = ?1
          UNION ALL SELECT name, config, 1 AS rank FROM environments WHERE name = ?2 ORDER BY rank LIMIT 1`,
    args: [userId, inline],
  });
  const row = found.rows[0];
  return row ? { name: String(row.name), config: JSON.parse(String(row.config ?? "{}")) as OptionMap } : { name: inline, config: null };
}

/**
 * The body's fields (a form or a JSON object) on top of TRAINING_DEFAULTS, checked as a
 * complete configuration (its required options, one of epochs or steps); nothing is saved. A
 * field sent as the mask keeps the value stored in the environment start would write to; an
 * admin-only option from anyone else is a problem.
 *
 * @example
 * const { environment, options, problems } = await prepareTraining(db, { "--model_family": "flux", "--max_train_steps": "100" }, { id: 7, level: "researcher" });
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
  const target = await targetEnvironment(db, actor.id);
  let formOptions = typed.options;
  try {
    formOptions = keepMaskedSecrets(typed.options, target.config);
  } catch (error) {
    if (!(error instanceof MaskWithoutValue)) throw error;
    problems.push({
      field: error.path,
      message: `the mask stands for a stored value, and ${target.name} has none here: send the real value`,
    });
  }
  const checked = checkOptions({ ...TRAINING_DEFAULTS, ...formOptions }, true);
  problems.push(...checked.problems);
  if (actor.level !== "admin")
    for (const option of adminOnlyOptionsIn(checked.options)) problems.push({ field: option, message: "may be set only by an admin" });
  // Receivers this service would refuse to call (SSRF guard) are a problem now, not a surprise later.
  const { allow_private_targets } = await getSetting(db, "webhooks");
  for (const target of webhookConfig(checked.options).targets) {
    const refused = refusedTarget(target.url, allow_private_targets);
    if (refused) problems.push({ field: "--webhook_config", message: `${target.url}: ${refused}` });
  }
  return { environment: target.name, exists: target.config !== null, activeTab, options: checked.options, problems };
}

/**
 * Writes the prepared options as the configuration of the environment start runs (replacing its
 * options; an inline-run environment is created when needed); returns its name.
 *
 * @example
 * const environment = await saveActiveConfiguration(db, prepared, { id: 7, level: "researcher" }); // "inline-run-7"
 */
export async function saveActiveConfiguration(db: Database, prepared: Prepared, actor: Actor): Promise<string> {
  const name = prepared.environment;
  if (prepared.exists) {
    await updateEnvironment(db, name, { config: prepared.options }, actor, savedOptionProblems);
    return name;
  }
  try {
    await createEnvironment(
      db,
      { name, description: "Options of your last inline run (POST /api/training/start without an active environment)" },
      actor.id,
    );
  } catch (error) {
    // Created meanwhile by a start running beside this one: it is written below all the same.
    if (!(error instanceof ApiError) || error.status !== 409) throw error;
  }
  await updateEnvironment(db, name, { config: prepared.options }, actor, savedOptionProblems);
  return name;
}
