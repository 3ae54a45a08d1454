// `npm run migrate` (first step of `npm run deploy`): applies pending schema migrations to the
// production database at LIBSQL_URL (Turso or sqld), authenticated by LIBSQL_AUTH_TOKEN.
import { createClient } from "@libsql/client";
import { applyMigrations, currentSchemaVersion } from "../db/migrate";
import { LATEST_SCHEMA_VERSION } from "../db/migrations/index";

const url = process.env.LIBSQL_URL;
if (!url) {
  process.stderr.write("error: set LIBSQL_URL (and LIBSQL_AUTH_TOKEN) to the production database, e.g. libsql://<db>-<org>.turso.io\n");
  process.exit(1);
}
const client = createClient({ url, authToken: process.env.LIBSQL_AUTH_TOKEN });
try {
  const before = await currentSchemaVersion(client);
  const applied = await applyMigrations(client, {
    onApply: (m) => process.stdout.write(`applying schema migration ${m.version} (${m.name})\n`),
  });
  process.stdout.write(
    applied.length ? `schema migrated from version ${before} to ${LATEST_SCHEMA_VERSION}\n` : `schema already at version ${before}\n`,
  );
} catch (error) {
  process.stderr.write(`error: migration failed: ${(error as Error).message}\n`);
  process.exitCode = 1;
} finally {
  client.close();
}
