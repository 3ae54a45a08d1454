import type { Command } from "commander";
import { endpoints } from "../../../shared/client/endpoints";
import { cli, type Connection } from "../context";

/** Where a setting came from, in words: the flag, the variable, or the config file's path. */
function origin(from: "flag" | "env" | "config" | null, flag: string, variable: string, file: string): string {
  if (from === "flag") return `the ${flag} flag`;
  if (from === "env") return variable;
  if (from === "config") return file;
  return "nowhere";
}

/** `jobs whoami`: who the API key belongs to, on which service, and where both came from. */
export function addWhoami(program: Command): void {
  program
    .command("whoami")
    .description("Show who you are on the service (username, level, team), its URL, and where the URL and API key came from.")
    .addHelpText("after", "\nExamples:\n  jobs whoami\n  jobs whoami --format json | jq -r .user.username")
    .action(async (_options: unknown, command: Command) => {
      const { out, connection, client } = cli(command);
      const me = await client.call(endpoints.me, {});
      const source = sourceOf(connection);
      if (out.json) {
        out.printJson({ url: connection.url, user: me, source, config_file: connection.configFile });
        return;
      }
      const rows: [string, string][] = [
        ["user", `${me.username} <${me.email}>`],
        ["level", me.level ?? "none"],
        ["team", me.team_id ?? "none"],
        ["service", connection.url],
        ["url from", origin(source.url, "--url", "SERVICE_URL", connection.configFile)],
        ["key from", origin(source.api_key, "--api-key", "SERVICE_API_KEY", connection.configFile)],
      ];
      const width = Math.max(...rows.map(([label]) => label.length)) + 1;
      for (const [label, value] of rows) out.line(`${out.c.bold(`${label}:`.padEnd(width))} ${value}`);
    });
}

function sourceOf(connection: Connection) {
  return { url: connection.source.url, api_key: connection.source.apiKey };
}
