import { closeSync, constants, mkdirSync, openSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import { z } from "zod";

/** What `jobs login` stores: where the service is and the API key it created. Never a password. */
export const StoredConfig = z.object({
  url: z.string().url().optional(),
  api_key: z.string().min(1).optional(),
  username: z.string().optional(),
});
export type StoredConfig = z.infer<typeof StoredConfig>;

/**
 * The config file in the user's config directory: $XDG_CONFIG_HOME (else ~/.config) on Linux and
 * macOS, as gh and most CLIs there do, and %APPDATA% on Windows; `JOBS_CONFIG` names another file.
 * Three lines rather than a package: env-paths would put it under ~/Library/Preferences on macOS.
 */
export function configPath(env: NodeJS.ProcessEnv = process.env): string {
  if (env.JOBS_CONFIG) return env.JOBS_CONFIG;
  const base =
    process.platform === "win32"
      ? (env.APPDATA ?? join(homedir(), "AppData", "Roaming"))
      : env.XDG_CONFIG_HOME || join(homedir(), ".config");
  return join(base, "training-service", "config.json");
}

/** The stored config, or {} when there is none; a file that is not ours is an error naming it. */
export function readConfig(file = configPath()): StoredConfig {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return {};
    throw new Error(`cannot read ${file}: ${(error as Error).message}`);
  }
  let parsed: StoredConfig | undefined;
  try {
    parsed = StoredConfig.parse(JSON.parse(text));
  } catch {
    // reported below with the file's name
  }
  if (!parsed) throw new Error(`${file} is not a jobs config file (expected {"url", "api_key"}); fix or remove it`);
  return parsed;
}

/** A new file, never one that exists and never through a link someone planted there. */
const CREATE_NEW = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;

/**
 * Opens the temporary file new, readable by its owner only. Whatever already has its name (a
 * crashed run's file, or a link planted where JOBS_CONFIG names a shared folder, to make the key
 * land elsewhere) is removed, never followed, and the name taken again; taken again meanwhile, it fails.
 */
function openTemporary(temporary: string): number {
  try {
    return openSync(temporary, CREATE_NEW, 0o600);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
  }
  rmSync(temporary, { force: true });
  try {
    return openSync(temporary, CREATE_NEW, 0o600);
  } catch (error) {
    throw new Error(`cannot write ${temporary}: something else keeps creating it (${(error as NodeJS.ErrnoException).code})`);
  }
}

/**
 * Writes the config readable by its owner only (0600, its directory 0700): it holds an API key.
 * The file is written whole under a temporary name, created new (a planted link is never
 * followed), and renamed over the config (which replaces a link there rather than following
 * it), so a crash never leaves half a key and the key never lands anywhere else.
 */
export function writeConfig(config: StoredConfig, file = configPath()): void {
  mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
  const temporary = `${file}.${process.pid}.tmp`;
  const fd = openTemporary(temporary);
  try {
    writeFileSync(fd, JSON.stringify(config, null, 2) + "\n");
  } finally {
    closeSync(fd);
  }
  renameSync(temporary, file);
}
