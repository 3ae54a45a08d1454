import type { Command } from "commander";
import { endpoints } from "../../../shared/client/endpoints";
import type { Environment } from "../../../shared/schemas/environments";
import { cli } from "../context";
import { age, cell } from "../format-job";
import { addEnvEdit } from "./env-edit";

/** `jobs env`: the environments a submission can name, listed and shown as the API returns them. */
export function addEnv(program: Command): void {
  const env = program
    .command("env")
    .description("List, show, change, export and import environments (the options and dataloader a job runs with).");

  env
    .command("list")
    .description("Every environment: name, owner, model, tags and when it last changed.")
    .addHelpText("after", "\n`*` marks your active environment.\n\nExample:\n  $ jobs env list")
    .action(async (_options: object, command: Command) => {
      const { out, client } = cli(command);
      const answer = await client.call(endpoints.configList, { query: { config_type: "model" } });
      if (out.json) return out.printJson(answer);
      if (!answer.environments.length) return out.note("No environments yet.");
      out.table(
        ["NAME", "OWNER", "MODEL", "TYPE", "TAGS", "LAST RUN", "UPDATED"],
        answer.environments.map((e) => [
          e.active ? `${e.name} *` : e.name,
          cell(e.owner),
          cell(e.model_family),
          cell(e.model_type),
          e.tags.length ? e.tags.join(",") : "-",
          e.last_run ? `${e.last_run.job_id} ${e.last_run.status}` : "-",
          age(e.updated_at),
        ]),
      );
    });

  env
    .command("show")
    .description("One environment: its owner and model, each option as `--key value`, and its dataloader's size.")
    .argument("<name>", "the environment's name")
    .addHelpText(
      "after",
      "\nSecret-looking values are shown as the API masks them (`********`).\n\nExample:\n  $ jobs env show portraits-flux",
    )
    .action(async (name: string, _options: object, command: Command) => {
      const { out, client } = cli(command);
      const environment = await client.call(endpoints.configGet, { params: { name }, query: {} });
      if (out.json) return out.printJson(environment);
      for (const line of describe(environment)) out.line(line);
    });

  addEnvEdit(env);
}

/** The text `env show` prints: a header of fields, a blank line, then one `--key value` line per option. */
function describe(environment: Environment): string[] {
  const model = [environment.model_family, environment.model_flavour, environment.model_type, environment.lora_type].filter(Boolean);
  const datasets = environment.dataloader.length;
  const header = [
    `name:        ${environment.name}${environment.active ? " (active)" : ""}`,
    `owner:       ${cell(environment.owner)}`,
    `model:       ${model.length ? model.join(" ") : "-"}`,
    `tags:        ${environment.tags.length ? environment.tags.map(optionText).join(",") : "-"}`,
    `description: ${optionText(environment.description ?? "-")}`,
    `dataloader:  ${datasets} dataset${datasets === 1 ? "" : "s"}`,
    `updated:     ${environment.updated_at}`,
  ];
  const options = Object.entries(environment.config).map(([key, value]) => `${key} ${optionText(value)}`);
  return [...header, "", ...(options.length ? options : ["(no options)"])];
}

// A value as `jobs env show` prints it: a string of plain printable characters that does not read
// as JSON (so not "16" or "true") as it is; anything else as JSON, so a number stays apart from its
// string and no raw control character (another user may have written it) reaches the terminal.
function optionText(value: string | number | boolean | null): string {
  return typeof value === "string" && /^[\x21-\x7e]+$/.test(value) && !readsAsJson(value) ? value : JSON.stringify(value);
}

function readsAsJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}
