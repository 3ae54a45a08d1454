import { createClient, type Client } from "@libsql/client/web";
import type { LibSQLDatabase } from "drizzle-orm/libsql";
import { drizzle } from "drizzle-orm/libsql/web";
import type { Config } from "../config";
import * as schema from "./schema";

export type Database = LibSQLDatabase<typeof schema> & { $client: Client };

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
  return drizzle(client, { schema }) as Database;
}
