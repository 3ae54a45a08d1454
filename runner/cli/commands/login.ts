import { hostname } from "node:os";
import type { Command } from "commander";
import { ServiceClient } from "../../../shared/client/client";
import { endpoints } from "../../../shared/client/endpoints";
import { configPath, readConfig, writeConfig } from "../config-file";
import { checkServiceUrl, clientOf, outputOf, type GlobalOptions } from "../context";
import { UsageError } from "../output";
import { ask, askSecret, canPrompt, readStdin } from "../prompt";

interface LoginOptions extends GlobalOptions {
  username?: string;
  passwordStdin?: boolean;
  keyName?: string;
}

/** The session cookie(s) of a login answer, as a Cookie header: each Set-Cookie's `name=value`. */
export function cookieOf(response: Response): string {
  return response.headers
    .getSetCookie()
    .map((line) => line.split(";")[0]!.trim())
    .filter((pair) => pair.includes("=") && !pair.endsWith("="))
    .join("; ");
}

/** `jobs login`: a new API key from a username and password, stored in the config file. */
export function addLogin(program: Command): void {
  program
    .command("login")
    .description(
      "Log in with your username and password, create an API key for this machine and store it (with the URL) in the config file, readable by you only. The password is never stored.",
    )
    .option("--username <name>", "your username or email (else asked)")
    .option("--password-stdin", "read the password from stdin (for scripts), not from the terminal")
    .option("--key-name <name>", "the new API key's name", `jobs-cli@${hostname()}`)
    .addHelpText(
      "after",
      '\nThe URL comes from --url, SERVICE_URL or the stored one, and is asked on a terminal.\n\nExamples:\n  jobs login --url https://train.example.com\n  echo "$PASSWORD" | jobs login --url https://train.example.com --username alice --password-stdin',
    )
    .action(async (_options: unknown, command: Command) => {
      const out = outputOf(command);
      const options = command.optsWithGlobals() as LoginOptions;
      const file = configPath();
      const stored = readConfig(file);
      const interactive = canPrompt();
      if (!interactive && !options.passwordStdin)
        throw new UsageError("no terminal to ask for the password: pipe it in with --password-stdin (and pass --username and --url)");

      const knownUrl = options.url ?? process.env.SERVICE_URL ?? stored.url;
      const url = (interactive && !options.url ? await ask("Service URL", knownUrl) : (knownUrl ?? "")).replace(/\/+$/, "");
      if (!url) throw new UsageError("no service URL: pass --url or set SERVICE_URL");
      checkServiceUrl(url);
      const username =
        options.username ?? (interactive && !options.passwordStdin ? await ask("Username", stored.username) : stored.username) ?? "";
      if (!username) throw new UsageError("no username: pass --username");
      const password = options.passwordStdin ? await readStdin() : await askSecret("Password");
      if (!password) throw new UsageError(options.passwordStdin ? "no password on stdin" : "no password given");

      const client = clientOf({ url, apiKey: null });
      let cookie = "";
      const session = await client.call(
        endpoints.login,
        { body: { username, password } },
        { onResponse: (response) => (cookie = cookieOf(response)) },
      );
      if (!cookie) throw new Error(`${url} logged you in but set no session cookie; is it a training service?`);
      const withSession = new ServiceClient({ ...client.options, cookie });
      let key;
      try {
        key = await withSession.call(endpoints.createApiKey, { body: { name: options.keyName ?? `jobs-cli@${hostname()}` } });
      } finally {
        // The session was only a means to the key: end it rather than leave it valid for a day.
        await withSession
          .call(endpoints.logout, {})
          .catch((error: Error) => out.note(`warning: could not log the session out: ${error.message}`));
      }
      const name = session.user.username;
      writeConfig({ url, api_key: key.key, username: name }, file);
      if (out.json) out.printJson({ url, username: name, key_prefix: key.prefix, config_file: file });
      else out.note(`Logged in to ${url} as ${name}; API key ${key.prefix}… saved to ${file}`);
    });
}
