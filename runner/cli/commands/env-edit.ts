import { readFileSync, writeFileSync } from "node:fs";
import type { Command } from "commander";
import { ServiceError, type ServiceClient } from "../../../shared/client/client";
import { endpoints } from "../../../shared/client/endpoints";
import { EnvironmentExport, EnvironmentName } from "../../../shared/schemas/environments";
import { cli } from "../context";
import { optionChanges } from "../option-args";
import { UsageError, type Output } from "../output";

/** What an import file must hold: an export (GET /api/configs/{name}/export); every field but the name optional. */
const ImportFile = EnvironmentExport.partial();

/** `jobs env set`, `export` and `import`: change an environment's options, save one to a file, create one from a file. */
export function addEnvEdit(env: Command): void {
  env
    .command("set")
    .description("Change options of an environment: --key value sets one, --unset --key removes one; the others are kept.")
    .argument("<name>", "the environment's name")
    .argument("[options...]", "--key value, --key=value, --flag (true), --unset --key")
    .allowUnknownOption()
    .addHelpText(
      "after",
      `
Values are read as \`jobs env show\` prints them: 16, 0.0001, true, false and null as JSON,
"16" (quoted) as the string 16, anything else as text; a value starting with -- goes as
--key=value. The whole option map is sent back (PUT /api/configs/{name}); secrets the API
masks (********) keep their stored values. Only the environment's owner, a lead or an admin
may change it.

Examples:
  $ jobs env set faces --learning_rate 0.0002 --lora_rank 32 --push_to_hub false
  $ jobs env set faces --validation_prompt "a photo of ada" --unset --hub_token`,
    )
    .action(async (name: string, words: string[], _options: object, command: Command) => {
      const changes = optionChanges(words);
      const { out, client } = cli(command);
      const environment = await client.call(endpoints.configGet, { params: { name }, query: {} });
      const config = { ...environment.config };
      const absent = changes.unset.filter((key) => !(key in config));
      for (const key of changes.unset) delete config[key];
      for (const [key, value] of changes.set) config[key] = value;
      const saved = await client.call(endpoints.configUpdate, { params: { name }, body: { config } });
      if (out.json) return out.printJson(saved);
      const said = [
        changes.set.length ? `set ${changes.set.map(([key]) => key).join(", ")}` : null,
        changes.unset.length ? `removed ${changes.unset.join(", ")}` : null,
      ].filter(Boolean);
      out.line(`Saved ${saved.name}: ${said.join("; ")}`);
      if (absent.length) out.note(`(${absent.join(", ")} ${absent.length === 1 ? "was" : "were"} not set)`);
    });

  env
    .command("export")
    .description("Write an environment as a JSON file (GET /api/configs/{name}/export): to -o FILE, else to stdout.")
    .argument("<name>", "the environment's name")
    .option("-o, --output <file>", "the file to write (replaced if it exists)")
    .option("--unmasked", "secrets as stored, not ******** (its owner, leads and admins only)")
    .addHelpText(
      "after",
      "\nThe file is what `jobs env import` reads. Secrets read ******** unless --unmasked.\n\nExamples:\n  $ jobs env export faces -o faces.json\n  $ jobs env export faces --unmasked > faces.json",
    )
    .action(async (name: string, options: { output?: string; unmasked?: boolean }, command: Command) => {
      const { out, client } = cli(command);
      const exported = await client.call(endpoints.configExport, {
        params: { name },
        query: options.unmasked ? { unmasked: true } : {},
      });
      if (options.output === undefined) return out.line(JSON.stringify(exported, null, 2));
      writeFileSync(options.output, JSON.stringify(exported, null, 2) + "\n", { mode: options.unmasked ? 0o600 : 0o644 });
      out.note(`Wrote ${exported.name} to ${options.output}`);
    });

  env
    .command("import")
    .description("Create the environment a file describes (as `jobs env export` writes it); --replace overwrites one of that name.")
    .argument("<file>", "a JSON file as `jobs env export` writes it")
    .option("--name <name>", "the environment's name (default: the file's)")
    .option("--replace", "if an environment of that name exists, replace its description, tags, options and dataloader")
    .addHelpText(
      "after",
      `
A name that is taken is refused (exit 1) unless --replace; replacing needs the environment's
owner, a lead or an admin. Values masked in the file (********) keep the stored ones when
replacing; a new environment has none stored, so export with --unmasked to copy secrets.

Examples:
  $ jobs env import faces.json --name faces-copy
  $ jobs env import faces.json --replace`,
    )
    .action(async (file: string, options: { name?: string; replace?: boolean }, command: Command) => {
      const definition = readImportFile(file, options.name);
      const { out, client } = cli(command);
      const saved = await importEnvironment(out, client, definition, Boolean(options.replace));
      if (out.json) return out.printJson(saved.environment);
      out.line(`${saved.replaced ? "Replaced" : "Created"} ${saved.environment.name} from ${file}`);
    });
}

type Definition = ReturnType<typeof ImportFile.parse> & { name: string };

/** The file's environment, checked before any request (a usage error names what is wrong). */
function readImportFile(file: string, name: string | undefined): Definition {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (error) {
    throw new UsageError(`cannot read ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (error) {
    throw new UsageError(`${file} is not JSON: ${(error as Error).message}`);
  }
  const parsed = ImportFile.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new UsageError(`${file} is not an exported environment: ${issue.path.join(".") || "(file)"}: ${issue.message}`);
  }
  const chosen = name ?? parsed.data.name;
  if (chosen === undefined) throw new UsageError(`${file} names no environment: add --name`);
  const checked = EnvironmentName.safeParse(chosen);
  if (!checked.success) throw new UsageError(`${JSON.stringify(chosen)} is not an environment name: ${checked.error.issues[0]!.message}`);
  return { ...parsed.data, name: checked.data };
}

/**
 * Creates the environment (POST /api/configs/environments, then PUT its options and dataloader,
 * which creation does not take); a PUT the API refuses deletes what the POST created, so a
 * refused import leaves nothing. A taken name is the API's 409, or with `replace` a PUT.
 */
async function importEnvironment(out: Output, client: ServiceClient, d: Definition, replace: boolean) {
  const contents = {
    description: d.description ?? null,
    ...(d.tags ? { tags: d.tags } : {}),
    ...(d.config ? { config: d.config } : {}),
    ...(d.dataloader ? { dataloader: d.dataloader } : {}),
  };
  const model = (value: string | null | undefined) => (value ? value : undefined);
  try {
    await client.call(endpoints.configCreate, {
      body: {
        name: d.name,
        model_family: model(d.model_family),
        model_flavour: model(d.model_flavour),
        model_type: model(d.model_type),
        lora_type: model(d.lora_type),
      },
    });
  } catch (error) {
    if (!(error instanceof ServiceError) || error.status !== 409) throw error;
    if (!replace) throw new ServiceError(409, error.code, `${error.detail}: add --replace to replace environment ${d.name}`);
    return { replaced: true, environment: await client.call(endpoints.configUpdate, { params: { name: d.name }, body: contents }) };
  }
  try {
    return { replaced: false, environment: await client.call(endpoints.configUpdate, { params: { name: d.name }, body: contents }) };
  } catch (error) {
    await client.call(endpoints.configDelete, { params: { name: d.name } }).catch(() => {
      out.note(`(environment ${d.name} was created but its options were refused; delete it with DELETE /api/configs/${d.name})`);
    });
    throw error;
  }
}
