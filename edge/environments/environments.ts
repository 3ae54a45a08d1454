import { and, asc, eq, sql } from "drizzle-orm";
import { adminOnlyOptionsIn } from "../../shared/admin-options";
import { ownerScope } from "../../shared/levels";
import type {
  ConfigOptions,
  Environment,
  EnvironmentCreate,
  EnvironmentExport,
  EnvironmentSummary,
  EnvironmentUpdate,
  DataloaderDataset,
} from "../../shared/schemas/environments";
import { keepMaskedSecrets, maskSecrets, MaskWithoutValue } from "../../shared/secrets-mask";
import type { Database } from "../db/client";
import { isUniqueViolation } from "../db/errors";
import { environments, queueEntries } from "../db/schema";
import { ApiError, conflict, notFound } from "../errors";
import { isActiveFor } from "./activate";
import { checkDataloader, starterDataloader } from "./dataloader";
import { EXAMPLE_ENVIRONMENTS } from "./examples";
import { assertEnvironmentName, assertNotOthersInlineName } from "./names";
import { whyUnchanged, type Actor } from "./ownership";

// The environment's model columns mirror these options of its config map.
const MODEL_OPTIONS = {
  model_family: "--model_family",
  model_flavour: "--model_flavour",
  model_type: "--model_type",
  lora_type: "--lora_type",
} as const;

// `active` and `owner` as the caller sees them: their own active environment, the owner's username.
const columnsFor = (userId: number) => ({
  name: environments.name,
  description: environments.description,
  tags: environments.tags,
  model_family: environments.modelFamily,
  model_flavour: environments.modelFlavour,
  model_type: environments.modelType,
  lora_type: environments.loraType,
  config: environments.config,
  dataloader: environments.dataloader,
  active: isActiveFor(userId),
  owner: sql<string | null>`(SELECT u.username FROM users u WHERE u.id = ${environments.createdBy})`,
  created_at: environments.createdAt,
  updated_at: environments.updatedAt,
});

type Row = Omit<Environment, "active"> & { active: number };

/**
 * How an answer shows an environment's secrets: `masked` (every answer unless asked otherwise,
 * for everyone) or `unmasked`, as stored (asked for, and only for its owner, leads and admins).
 */
export type SecretsView = "masked" | "unmasked";

/** A stored row as an answer shows it: secret-looking options and dataloader values masked unless `view` is `unmasked`. */
const toEnvironment = (row: Row, view: SecretsView = "masked"): Environment => ({
  ...row,
  config: view === "masked" ? maskSecrets(row.config) : row.config,
  dataloader: view === "masked" ? maskSecrets(row.dataloader) : row.dataloader,
  active: Number(row.active) === 1,
});

/** 422 naming each admin-only option a caller below admin tried to save. */
function assertMaySet(config: ConfigOptions, actor: Actor, pathPrefix: string): void {
  if (actor.level === "admin") return;
  const refused = adminOnlyOptionsIn(config);
  if (refused.length) {
    throw new ApiError(
      422,
      "admin_only_option",
      `${refused.join(", ")} may be set only by an admin; remove ${refused.length === 1 ? "it" : "them"} (pick a trainer the box declares with --trainer <name>)`,
      refused.map((option) => ({ path: `${pathPrefix}${option}`, message: "admin only" })),
    );
  }
}

/**
 * The rules an option map must pass to be saved: edge/training/options.ts `savedOptionProblems`
 * (the training form's rules). Passed in by the caller, because the training room imports this one.
 */
export type OptionRules = (config: ConfigOptions) => { field: string; message: string }[];

/** 422 `invalid_option` naming each option whose value `rules` refuse. */
function assertValidOptions(config: ConfigOptions, rules: OptionRules): void {
  const problems = rules(config);
  if (problems.length)
    throw new ApiError(
      422,
      "invalid_option",
      `${problems.length === 1 ? "An option is" : `${problems.length} options are`} refused: ${problems.map((p) => `${p.field} ${p.message}`).join("; ")}`,
      problems.map((p) => ({ path: `body.config.${p.field}`, message: p.message })),
    );
}

const missing = (name: string) => notFound(`Environment ${JSON.stringify(name)}`);
const taken = (name: string) => conflict(`An environment named ${JSON.stringify(name)} already exists; choose another name`);

/**
 * Creates an environment with its option map seeded from the model fields given and the starter
 * dataloader, owned by its creator; 409 when the name is taken.
 *
 * @example
 * const env = await createEnvironment(db, { name: "portraits", model_family: "flux", model_type: "lora" }, userId);
 */
export async function createEnvironment(db: Database, input: EnvironmentCreate, createdBy: number): Promise<Environment> {
  assertEnvironmentName(input.name);
  assertNotOthersInlineName(input.name, createdBy);
  let example: (typeof EXAMPLE_ENVIRONMENTS)[number] | undefined;
  if (input.from_example !== undefined) {
    example = EXAMPLE_ENVIRONMENTS.find((e) => e.name === input.from_example);
    if (!example)
      throw new ApiError(
        422,
        "unknown_example",
        `There is no example named ${JSON.stringify(input.from_example)}; GET /api/configs/examples lists them`,
        [{ path: "body.from_example", message: `one of ${EXAMPLE_ENVIRONMENTS.map((e) => e.name).join(", ")}` }],
      );
    input = {
      ...pickDefined({
        description: example.description ?? undefined,
        model_family: example.model_family ?? undefined,
        model_flavour: example.model_flavour ?? undefined,
        model_type: example.model_type ?? undefined,
        lora_type: example.lora_type ?? undefined,
      }),
      ...pickDefined(input),
    } as EnvironmentCreate;
  }
  const config: ConfigOptions = { ...(example?.config ?? {}) };
  for (const [field, option] of Object.entries(MODEL_OPTIONS)) {
    const value = input[field as keyof typeof MODEL_OPTIONS];
    if (value !== undefined) config[option] = value;
  }
  const now = new Date().toISOString();
  try {
    const [row] = await db
      .insert(environments)
      .values({
        name: input.name,
        description: input.description ?? null,
        modelFamily: input.model_family ?? null,
        modelFlavour: input.model_flavour ?? null,
        modelType: input.model_type ?? null,
        loraType: input.lora_type ?? null,
        tags: example ? [...example.tags] : [],
        config,
        dataloader: starterDataloader(input.name),
        createdBy,
        createdAt: now,
        updatedAt: now,
      })
      .returning(columnsFor(createdBy));
    return toEnvironment(row!);
  } catch (error) {
    if (isUniqueViolation(error)) throw taken(input.name);
    throw error;
  }
}

/**
 * The named environment as `reader` sees it (their active flag; secrets masked unless `view` is
 * `unmasked`); 404 when there is none. Unmasked only for its owner, leads and admins: anyone
 * else asking for it gets 403 `not_owner`.
 *
 * @example
 * const { config, dataloader, active, owner } = await getEnvironment(db, "portraits", { id: 7, level: "researcher" });
 */
export async function getEnvironment(db: Database, name: string, reader: Actor, view: SecretsView = "masked"): Promise<Environment> {
  const [found] = await db
    .select({ ...columnsFor(reader.id), createdBy: environments.createdBy })
    .from(environments)
    .where(eq(environments.name, name));
  if (!found) throw missing(name);
  const { createdBy, ...row } = found;
  const scope = ownerScope(reader);
  if (view === "unmasked" && scope !== null && createdBy !== scope)
    throw new ApiError(
      403,
      "not_owner",
      `Environment ${JSON.stringify(name)} belongs to another user: only its owner, a lead or an admin may read its secrets; leave out unmasked to read it masked`,
    );
  return toEnvironment(row, view);
}

/**
 * Every environment, by name, without its option map and dataloader; `active` is `userId`'s.
 *
 * @example
 * const active = (await listEnvironments(db, userId)).find((env) => env.active);
 */
export async function listEnvironments(db: Database, userId: number): Promise<EnvironmentSummary[]> {
  const columns = columnsFor(userId);
  const rows = await db
    .select({
      name: columns.name,
      description: columns.description,
      tags: columns.tags,
      model_family: columns.model_family,
      model_type: columns.model_type,
      active: columns.active,
      owner: columns.owner,
      created_at: columns.created_at,
      updated_at: columns.updated_at,
    })
    .from(environments)
    .orderBy(asc(environments.name));
  const lastRuns = await lastRunByEnvironment(db);
  return rows.map((row: (typeof rows)[number]) => ({ ...row, active: Number(row.active) === 1, last_run: lastRuns.get(row.name) ?? null }));
}

/**
 * The newest job submitted with each environment name (one grouped read of the queue; SQLite
 * takes a grouped row's other columns from the row that gave max(id)). Jobs record the name they
 * were submitted with, so a renamed environment's earlier runs stay under the old name. What it
 * carries is what the queue listing shows everyone (id, status, times).
 */
async function lastRunByEnvironment(db: Database): Promise<Map<string, NonNullable<EnvironmentSummary["last_run"]>>> {
  const rows = await db
    .select({
      name: queueEntries.configName,
      newest: sql<number>`max(${queueEntries.id})`,
      job_id: queueEntries.jobId,
      status: queueEntries.status,
      queued_at: queueEntries.queuedAt,
      started_at: queueEntries.startedAt,
      completed_at: queueEntries.completedAt,
    })
    .from(queueEntries)
    .where(sql`${queueEntries.configName} IS NOT NULL`)
    .groupBy(queueEntries.configName);
  const byName = new Map<string, NonNullable<EnvironmentSummary["last_run"]>>();
  for (const { name, newest: _newest, ...run } of rows) if (name) byName.set(name, run);
  return byName;
}

/**
 * Applies an update in one statement, conditional on the caller's right to change it (the stored
 * options and dataloader are read first only to keep the values sent back masked). `config` replaces the whole option map (not a merge) and
 * the model columns follow its `--model_*` and `--lora_type` options; `name` renames (409 when
 * taken). The dataloader keeps its paths across a rename: regenerate it to follow the new name.
 * Only the owner, a lead or an admin may (else 403 `not_owner`); admin-only options only from an
 * admin (else 422), and each option's value as `optionRules` allow (else 422 `invalid_option`).
 * An option or dataloader value sent as the mask keeps its stored value.
 *
 * @example
 * await updateEnvironment(db, "portraits", { name: "portraits-v2", config: { "--learning_rate": 0.0001 } }, { id: 7, level: "researcher" }, savedOptionProblems);
 */
export async function updateEnvironment(
  db: Database,
  name: string,
  changes: EnvironmentUpdate,
  actor: Actor,
  optionRules: OptionRules,
): Promise<Environment> {
  if (changes.name !== undefined) {
    assertEnvironmentName(changes.name);
    assertNotOthersInlineName(changes.name, actor.id);
  }
  const scope = ownerScope(actor);
  const owned = scope === null ? eq(environments.name, name) : and(eq(environments.name, name), eq(environments.createdBy, scope));
  if (changes.config !== undefined || changes.dataloader !== undefined) {
    const [stored] = await db.select({ config: environments.config, dataloader: environments.dataloader }).from(environments).where(owned);
    if (!stored) throw await whyUnchanged(db, name);
    if (changes.config !== undefined) {
      changes = { ...changes, config: keepSecrets(changes.config, stored.config, "body.config.") };
      assertMaySet(changes.config!, actor, "body.config.");
      assertValidOptions(changes.config!, optionRules);
    }
    if (changes.dataloader !== undefined) {
      changes = { ...changes, dataloader: keepSecrets(changes.dataloader, stored.dataloader, "body.dataloader") };
      checkDataloader(changes.dataloader!, actor);
    }
  }
  const set: Partial<typeof environments.$inferInsert> = { updatedAt: new Date().toISOString() };
  if (changes.name !== undefined) set.name = changes.name;
  if (changes.dataloader !== undefined) set.dataloader = changes.dataloader;
  if (changes.description !== undefined) set.description = changes.description;
  if (changes.tags !== undefined) set.tags = changes.tags;
  if (changes.config !== undefined) {
    const option = (key: string) => {
      const value = changes.config![key];
      return value === undefined || value === null ? null : String(value);
    };
    Object.assign(set, {
      config: changes.config,
      modelFamily: option(MODEL_OPTIONS.model_family),
      modelFlavour: option(MODEL_OPTIONS.model_flavour),
      modelType: option(MODEL_OPTIONS.model_type),
      loraType: option(MODEL_OPTIONS.lora_type),
    });
  }
  try {
    const [row] = await db.update(environments).set(set).where(owned).returning(columnsFor(actor.id));
    if (!row) throw await whyUnchanged(db, name);
    return toEnvironment(row);
  } catch (error) {
    if (isUniqueViolation(error)) throw taken(changes.name!);
    throw error;
  }
}

/**
 * The named environment as a portable file: no owner or active flag, no timestamps but the
 * export's own, secrets masked unless `view` is `unmasked` (as getEnvironment).
 *
 * @example
 * const file = JSON.stringify(await exportEnvironment(db, "portraits", { id: 7, level: "researcher" }));
 */
export async function exportEnvironment(
  db: Database,
  name: string,
  reader: Actor,
  view: SecretsView = "masked",
): Promise<EnvironmentExport> {
  const {
    active: _active,
    owner: _owner,
    created_at: _created,
    updated_at: _updated,
    ...definition
  } = await getEnvironment(db, name, reader, view);
  return { ...definition, exported_at: new Date().toISOString() };
}

/**
 * Deletes an environment (and anyone's choice of it as active): for its owner, leads and admins,
 * else 403 `not_owner`; 404 when there is none. Jobs already submitted keep running: they carry
 * their own snapshot of its configuration.
 *
 * @example
 * await deleteEnvironment(db, "portraits", { id: 7, level: "researcher" });
 */
export async function deleteEnvironment(db: Database, name: string, actor: Actor): Promise<void> {
  const owned = "name = ?1 AND (?2 IS NULL OR created_by = ?2)";
  const args = [name, ownerScope(actor)];
  const [, deleted] = await db.$client.batch(
    [
      { sql: `DELETE FROM active_environments WHERE environment_id IN (SELECT id FROM environments WHERE ${owned})`, args },
      { sql: `DELETE FROM environments WHERE ${owned} RETURNING id`, args },
    ],
    "write",
  );
  if (!deleted!.rows.length) throw await whyUnchanged(db, name);
}

/**
 * `incoming` (an option map or a dataloader) with every mask sent back replaced by the stored
 * value at its key path; 422 naming the path where a mask stands for nothing stored.
 *
 * @example
 * keepSecrets({ "--hub_token": "********" }, { "--hub_token": "hf_x" }, "body.config."); // { "--hub_token": "hf_x" }
 */
export function keepSecrets<T extends ConfigOptions | DataloaderDataset[]>(incoming: T, stored: T | null, pathPrefix: string): T {
  try {
    return keepMaskedSecrets(incoming, stored);
  } catch (error) {
    if (!(error instanceof MaskWithoutValue)) throw error;
    throw new ApiError(422, "mask_without_value", error.message, [
      { path: `${pathPrefix}${error.path}`, message: "the mask stands for a stored value, and none is stored here" },
    ]);
  }
}

const pickDefined = <T extends Record<string, unknown>>(o: T): Partial<T> =>
  Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
