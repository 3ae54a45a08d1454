import { asc, eq } from "drizzle-orm";
import type {
  ConfigOptions,
  Environment,
  EnvironmentCreate,
  EnvironmentExport,
  EnvironmentSummary,
  EnvironmentUpdate,
} from "../../shared/schemas/environments";
import type { Database } from "../db/client";
import { isUniqueViolation } from "../db/errors";
import { environments } from "../db/schema";
import { ApiError, conflict, notFound } from "../errors";
import { isActiveColumn } from "./activate";
import { starterDataloader } from "./dataloader";
import { EXAMPLE_ENVIRONMENTS } from "./examples";
import { assertEnvironmentName } from "./names";

// The environment's model columns mirror these options of its config map.
const MODEL_OPTIONS = {
  model_family: "--model_family",
  model_flavour: "--model_flavour",
  model_type: "--model_type",
  lora_type: "--lora_type",
} as const;

const columns = {
  name: environments.name,
  description: environments.description,
  tags: environments.tags,
  model_family: environments.modelFamily,
  model_flavour: environments.modelFlavour,
  model_type: environments.modelType,
  lora_type: environments.loraType,
  config: environments.config,
  dataloader: environments.dataloader,
  active: isActiveColumn,
  created_at: environments.createdAt,
  updated_at: environments.updatedAt,
};

type Row = Omit<Environment, "active"> & { active: number };
const toEnvironment = (row: Row): Environment => ({ ...row, active: Number(row.active) === 1 });
const missing = (name: string) => notFound(`Environment ${JSON.stringify(name)}`);
const taken = (name: string) => conflict(`An environment named ${JSON.stringify(name)} already exists; choose another name`);

/**
 * Creates an environment with its option map seeded from the model fields given and the starter
 * dataloader; 409 when the name is taken.
 *
 * @example
 * const env = await createEnvironment(db, { name: "portraits", model_family: "flux", model_type: "lora" }, userId);
 */
export async function createEnvironment(db: Database, input: EnvironmentCreate, createdBy: number | null): Promise<Environment> {
  assertEnvironmentName(input.name);
  let example: (typeof EXAMPLE_ENVIRONMENTS)[number] | undefined;
  if (input.from_example !== undefined) {
    example = EXAMPLE_ENVIRONMENTS.find((e) => e.name === input.from_example);
    if (!example) throw new ApiError(422, "unknown_example", `There is no example named ${JSON.stringify(input.from_example)}; GET /api/configs/examples lists them`, [{ path: "body.from_example", message: `one of ${EXAMPLE_ENVIRONMENTS.map((e) => e.name).join(", ")}` }]);
    input = { ...pickDefined({ description: example.description ?? undefined, model_family: example.model_family ?? undefined, model_flavour: example.model_flavour ?? undefined, model_type: example.model_type ?? undefined, lora_type: example.lora_type ?? undefined }), ...pickDefined(input) } as EnvironmentCreate;
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
      .returning(columns);
    return toEnvironment(row!);
  } catch (error) {
    if (isUniqueViolation(error)) throw taken(input.name);
    throw error;
  }
}

/**
 * The named environment; 404 when there is none.
 *
 * @example
 * const { config, dataloader, active } = await getEnvironment(db, "portraits");
 */
export async function getEnvironment(db: Database, name: string): Promise<Environment> {
  const [row] = await db.select(columns).from(environments).where(eq(environments.name, name));
  if (!row) throw missing(name);
  return toEnvironment(row);
}

/**
 * Every environment, by name, without its option map and dataloader.
 *
 * @example
 * const active = (await listEnvironments(db)).find((env) => env.active);
 */
export async function listEnvironments(db: Database): Promise<EnvironmentSummary[]> {
  const rows = await db
    .select({
      name: columns.name,
      description: columns.description,
      tags: columns.tags,
      model_family: columns.model_family,
      model_type: columns.model_type,
      active: columns.active,
      created_at: columns.created_at,
      updated_at: columns.updated_at,
    })
    .from(environments)
    .orderBy(asc(environments.name));
  return rows.map((row: (typeof rows)[number]) => ({ ...row, active: Number(row.active) === 1 }));
}

/**
 * Applies an update in one statement. `config` replaces the whole option map (not a merge) and
 * the model columns follow its `--model_*` and `--lora_type` options; `name` renames (409 when
 * taken). The dataloader keeps its paths across a rename: regenerate it to follow the new name.
 *
 * @example
 * await updateEnvironment(db, "portraits", { name: "portraits-v2", config: { "--learning_rate": 0.0001 } });
 */
export async function updateEnvironment(db: Database, name: string, changes: EnvironmentUpdate): Promise<Environment> {
  if (changes.name !== undefined) assertEnvironmentName(changes.name);
  const set: Partial<typeof environments.$inferInsert> = { updatedAt: new Date().toISOString() };
  if (changes.name !== undefined) set.name = changes.name;
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
    const [row] = await db.update(environments).set(set).where(eq(environments.name, name)).returning(columns);
    if (!row) throw missing(name);
    return toEnvironment(row);
  } catch (error) {
    if (isUniqueViolation(error)) throw taken(changes.name!);
    throw error;
  }
}

/**
 * The named environment as a portable file: no active flag, and no timestamps but the export's own.
 *
 * @example
 * const file = JSON.stringify(await exportEnvironment(db, "portraits"));
 */
export async function exportEnvironment(db: Database, name: string): Promise<EnvironmentExport> {
  const { active: _active, created_at: _created, updated_at: _updated, ...definition } = await getEnvironment(db, name);
  return { ...definition, exported_at: new Date().toISOString() };
}

const pickDefined = <T extends Record<string, unknown>>(o: T): Partial<T> => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
