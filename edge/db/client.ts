import { createClient, type Client } from "@libsql/client/web";
import type { LibSQLDatabase } from "drizzle-orm/libsql";
import { drizzle } from "drizzle-orm/libsql/web";
import type { Config } from "../config";

/** drizzle's query builder over libSQL. No relational schema: building it costs CPU on every request and nothing uses `db.query`. */
export type Database = LibSQLDatabase & { $client: Client };

/**
 * A libSQL client and drizzle over it, for one request. Deliberately not cached across requests:
 * a shared client shares its fetch queue, and workerd cancels I/O that crosses requests.
 * Locally the transport is the host's Hrana bridge (a service binding); deployed, HTTPS to libSQL.
 */
export function openDatabase(config: Config): Database {
  const bridge = config.libsqlBridge;
  const client = createClient({
    url: config.libsqlUrl,
    authToken: config.libsqlAuthToken,
    ...(bridge ? { fetch: (request: Request) => bridge.fetch(request) } : {}),
  });
  return drizzle(client) as Database;
}
