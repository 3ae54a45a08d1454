import {
  createClient,
  type Client,
  type InArgs,
  type InStatement,
  type ResultSet,
  type Transaction,
  type TransactionMode,
} from "@libsql/client/web";
import type { LibSQLDatabase } from "drizzle-orm/libsql";
import { drizzle } from "drizzle-orm/libsql/web";
import type { Config } from "../config";

/** drizzle's query builder over libSQL. No relational schema: building it costs CPU on every request and nothing uses `db.query`. */
export type Database = LibSQLDatabase & { $client: Client };

/**
 * A libSQL client and drizzle over it, for one request. Deliberately not cached across requests:
 * a shared client shares its fetch queue, and workerd cancels I/O that crosses requests.
 * Locally the transport is the host's Hrana bridge (a service binding); deployed, HTTPS to libSQL.
 * The client is made at its first use: many requests never touch the database (a submission
 * with a recently verified key, the health checks), and making one was about 5 % of a request's
 * CPU in workerd (`BENCH_ROUNDS=3 npm run bench:scheduler`, profiled).
 */
export function openDatabase(config: Config): Database {
  const bridge = config.libsqlBridge;
  const client = new LazyClient(() =>
    createClient({
      url: config.libsqlUrl,
      authToken: config.libsqlAuthToken,
      ...(bridge ? { fetch: (request: Request) => bridge.fetch(request) } : {}),
    }),
  );
  return drizzle(client) as Database;
}

/** A Client whose every call goes to the one `make` makes when first needed. */
class LazyClient implements Client {
  #made: Client | null = null;
  constructor(private readonly make: () => Client) {}
  private get real(): Client {
    return (this.#made ??= this.make());
  }
  execute(stmt: InStatement): Promise<ResultSet>;
  execute(sql: string, args?: InArgs): Promise<ResultSet>;
  execute(stmt: InStatement | string, args?: InArgs): Promise<ResultSet> {
    return typeof stmt === "string" ? this.real.execute(stmt, args) : this.real.execute(stmt);
  }
  batch(...args: Parameters<Client["batch"]>) {
    return this.real.batch(...args);
  }
  migrate(...args: Parameters<Client["migrate"]>) {
    return this.real.migrate(...args);
  }
  transaction(mode?: TransactionMode): Promise<Transaction> {
    return this.real.transaction(mode);
  }
  executeMultiple(sql: string) {
    return this.real.executeMultiple(sql);
  }
  sync() {
    return this.real.sync();
  }
  close() {
    this.#made?.close();
  }
  reconnect() {
    this.real.reconnect();
  }
  get closed(): boolean {
    return this.#made?.closed ?? false;
  }
  get protocol(): string {
    return this.real.protocol;
  }
}
