import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { secretNameProblem } from "../cloud/secrets";

/*
 * The local host's side of the SECRETS_HOST binding: secrets from the host process's
 * environment, then from files, read when asked, so they are never copied into the Worker's
 * bindings. One secret per request, by a name that passes edge/cloud/secrets.ts's check (no
 * path can be formed from it); there is no listing. Files follow the Docker and Kubernetes
 * conventions: `<NAME>_FILE` names a file, or SERVICE_SECRETS_DIR holds a file per secret.
 */

/** Where a secret was found on the host, and its value (a file's content trimmed). */
export type HostSecret = { value: string; source: "environment" | "file" };

/**
 * Looks one secret up on the host: its variable, else the file `<NAME>_FILE` names, else
 * `SERVICE_SECRETS_DIR/<NAME>`. `only` restricts it to one kind of source. Null when absent.
 *
 * @example
 * await hostSecret(process.env, "REPLICATE_API_TOKEN"); // { value: "r8_...", source: "file" }
 */
export async function hostSecret(
  env: Record<string, string | undefined>,
  name: string,
  only?: "environment" | "file",
): Promise<HostSecret | null> {
  if (secretNameProblem(name)) return null;
  if (only !== "file") {
    const value = env[name];
    if (value) return { value, source: "environment" };
  }
  if (only === "environment") return null;
  // A file <NAME>_FILE names must be there; one in the secrets directory may be absent.
  const candidates: [string | undefined, boolean][] = [
    [env[`${name}_FILE`], true],
    [env.SERVICE_SECRETS_DIR ? join(env.SERVICE_SECRETS_DIR, name) : undefined, false],
  ];
  for (const [path, required] of candidates) {
    if (!path) continue;
    try {
      const value = (await readFile(path, "utf8")).trim();
      if (value) return { value, source: "file" };
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== "ENOENT" || required) throw new Error(`the secret file ${path} cannot be read (${code ?? "error"})`);
    }
  }
  return null;
}

/**
 * The binding's answer to `GET http://secrets.host/<NAME>?source=environment|file`: 200 with the
 * value as text, 404 when absent, 400 for anything else (another method, a bad name, a listing),
 * 500 when a secret file exists but cannot be read. Never logs a value.
 *
 * @example
 * const response = await answerSecretRequest(new Request("http://secrets.host/HF_TOKEN?source=environment"), process.env);
 */
export async function answerSecretRequest(request: Request, env: Record<string, string | undefined>): Promise<Response> {
  const url = new URL(request.url);
  const name = decodeURIComponent(url.pathname.slice(1));
  const source = url.searchParams.get("source");
  const problem =
    request.method !== "GET"
      ? "only GET"
      : source !== "environment" && source !== "file"
        ? "source must be environment or file"
        : secretNameProblem(name);
  if (problem) return new Response(problem, { status: 400 });
  try {
    const found = await hostSecret(env, name, source as "environment" | "file");
    return found
      ? new Response(found.value, { status: 200, headers: { "content-type": "text/plain" } })
      : new Response(null, { status: 404 });
  } catch (error) {
    return new Response((error as Error).message, { status: 500 });
  }
}
