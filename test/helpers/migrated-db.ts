import { rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { createClient } from "@libsql/client/web";
import { applyMigrations } from "../../edge/db/migrate";
import { createHranaServer } from "../../edge/local/hrana";
import { stopWhenDone } from "./cleanup";
import { tempDataDir } from "./stack";

export interface MigratedDb {
  /** The libSQL client the Worker uses, over the same Hrana bridge as the stack. */
  client: ReturnType<typeof createClient>;
  /** The database file, for a second (file) client. */
  path: string;
  /** The Hrana bridge's handler, for a second client over the bridge (one whose requests a test can delay or interleave). */
  handle(request: Request): Promise<Response>;
  close(): void;
}

/** A fresh database file with every migration applied, reached as the Worker reaches it; closed at the end of the file if the test has not closed it. */
export async function openMigratedDb(): Promise<MigratedDb> {
  const path = join(tempDataDir(), "service.db");
  const server = createHranaServer(path);
  const client = createClient({ url: "http://libsql.internal", fetch: (request: Request) => server.handle(request) });
  const closeOnce = stopWhenDone(() => {
    client.close();
    server.close();
    rmSync(dirname(path), { recursive: true, force: true });
  });
  await applyMigrations(client);
  return {
    client,
    path,
    handle: (request) => server.handle(request),
    close() {
      void closeOnce();
    },
  };
}
