/*
 * The server side of libSQL's Hrana v2 HTTP protocol (JSON over POST /v2/pipeline), over a local
 * SQLite file. Hand-written because no npm package serves Hrana and sqld cannot be installed here:
 * the local Worker must talk to the database through the same unmodified `@libsql/client/web`
 * it uses in production, so this speaks just enough of the protocol for that client.
 *
 * One connection serves every stream, all on Node's one thread. A stream inside a transaction owns
 * the connection between its pipelines; other streams queue (FIFO) until it ends or sits idle too
 * long, in which case it is rolled back so one abandoned transaction cannot stall everyone.
 *
 * Another process may hold the database's write lock (a backup, a migration tool, `sqlite3`).
 * SQLite's own busy wait would block this thread - every request the host serves - for as long,
 * so the connection does not wait (busy_timeout 0): a pipeline that met the lock before changing
 * anything is tried again on a timer (BUSY_RETRY_MS, up to BUSY_WAIT_MS), the connection free for
 * others meanwhile, and answers SQLITE_BUSY only then (the Worker turns it into 503 with
 * Retry-After). libsql leaves a statement whose execution failed unreset, holding the read
 * snapshot it began with: once the other process committed, every write on the connection failed
 * with SQLITE_BUSY_SNAPSHOT for good. So after a failure, once no transaction is open, the
 * connection is closed (finalising every statement) and opened afresh.
 */
import { randomUUID, timingSafeEqual } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import Database from "libsql";

export interface HranaServerOptions {
  idleTransactionTimeoutMs?: number /* default 10_000 */;
  /** How long a pipeline that meets another process's lock is tried again before it answers SQLITE_BUSY (default 5000). */
  busyWaitMs?: number;
  logger?: (msg: string) => void;
}

/** The pause between tries of a pipeline that met another process's lock, growing to its last value. */
const BUSY_RETRY_MS = [5, 10, 20, 50, 100, 100, 200];

export interface HranaServer {
  /** Handles one HTTP request of the Hrana protocol (GET /v2, POST /v2/pipeline, others 404). */
  handle(request: Request): Promise<Response>;
  /** The same, without Request/Response objects (the loopback server's fast path). */
  answer(method: string, pathname: string, body: string): Promise<Answer>;
  /** How many statements have been compiled so far (a repeated statement should not add to it). */
  compiledCount(): number;
  /** Rolls back any open transaction and closes the database. */
  close(): void;
}

type SqlValue = null | bigint | number | string | Uint8Array;
type ProtoValue =
  | { type: "null" }
  | { type: "integer"; value: string }
  | { type: "float"; value: number }
  | { type: "text"; value: string }
  | { type: "blob"; base64: string };
interface ProtoStmt {
  sql?: string;
  sql_id?: number;
  args?: ProtoValue[];
  named_args?: { name: string; value: ProtoValue }[];
  want_rows?: boolean;
}
type ProtoCond =
  | { type: "ok" | "error"; step: number }
  | { type: "not"; cond: ProtoCond }
  | { type: "and" | "or"; conds: ProtoCond[] }
  | { type: "is_autocommit" };
type ProtoRequest =
  | { type: "execute"; stmt: ProtoStmt }
  | { type: "batch"; batch: { steps: { condition?: ProtoCond | null; stmt: ProtoStmt }[] } }
  | { type: "sequence" | "describe"; sql?: string; sql_id?: number }
  | { type: "store_sql"; sql_id: number; sql: string }
  | { type: "close_sql"; sql_id: number }
  | { type: "get_autocommit" | "close" };
interface ProtoError {
  message: string;
  code?: string;
}
interface StmtResult {
  cols: { name: string; decltype: string | null }[];
  rows: ProtoValue[][];
  affected_row_count: number;
  last_insert_rowid: string | null;
}

interface Stream {
  sqls: Map<number, string>;
  closed: boolean;
  timer?: NodeJS.Timeout;
}

class HranaError extends Error {
  constructor(
    message: string,
    readonly code = "HRANA_PROTO_ERROR",
  ) {
    super(message);
  }
}

const JSON_HEADERS = { "content-type": "application/json" }; // exactly this: the client compares it verbatim
const TEXT_HEADERS = { "content-type": "text/plain; charset=utf-8" };

/** An HTTP answer before it becomes a Response: the loopback server writes it without one. */
interface Answer {
  status: number;
  headers: Record<string, string>;
  body: string;
}
const json = (body: unknown, status = 200): Answer => ({ status, headers: JSON_HEADERS, body: JSON.stringify(body) });
const httpError = (status: number, message: string, code = "HRANA_PROTO_ERROR") => json({ message, code }, status);

export function createHranaServer(dbPath: string, options: HranaServerOptions = {}): HranaServer {
  const idleMs = options.idleTransactionTimeoutMs ?? 10_000;
  const busyWaitMs = options.busyWaitMs ?? 5000;
  const log = options.logger ?? (() => {});
  const open = () => {
    const connection = new Database(dbPath);
    connection.exec("PRAGMA journal_mode = WAL");
    // Never wait inside SQLite: that would block the host's one thread (see above).
    connection.exec("PRAGMA busy_timeout = 0");
    return {
      connection,
      counters: connection.prepare("SELECT total_changes(), changes(), last_insert_rowid()").raw(true).safeIntegers(true),
      // raw, not pluck: libsql's get() ignores pluck and returns a fresh object each time, which
      // never compares equal and would empty the cache on every statement.
      schemaVersionStatement: connection.prepare("PRAGMA schema_version").raw(true),
    };
  };
  let { connection: db, counters, schemaVersionStatement } = open();
  // A statement failed since the connection was opened, and may hold a stale snapshot (see above).
  let failed = false;

  // Compiled statements by SQL text, least recently used first: the Worker sends the same few
  // statements over and over, and compiling them is a large part of a small query's cost.
  // A schema change (ours or another process's) empties it: a statement's column list is fixed
  // when it is compiled, so `SELECT *` would otherwise miss a new column.
  const compiled = new Map<string, ReturnType<typeof db.prepare>>();
  const schemaVersion = () => (schemaVersionStatement.get([]) as number[])[0];
  let knownSchema = schemaVersion();
  let compiledTotal = 0;
  const noticeSchemaChange = () => {
    const now = schemaVersion();
    if (now !== knownSchema) {
      knownSchema = now;
      compiled.clear();
    }
  };
  // A compiled statement's columns never change (a schema change recompiles), so they are read once.
  const columnCache = new WeakMap<object, StmtResult["cols"]>();
  const columnsOf = (prepared: ReturnType<typeof db.prepare>) => {
    let cols = columnCache.get(prepared);
    if (!cols) columnCache.set(prepared, (cols = prepared.columns().map((c) => ({ name: c.name, decltype: c.type }))));
    return cols;
  };
  const statement = (sql: string) => {
    let prepared = compiled.get(sql);
    if (prepared) compiled.delete(sql);
    else {
      prepared = db.prepare(sql).safeIntegers(true);
      compiledTotal++;
    }
    compiled.set(sql, prepared);
    if (compiled.size > 256) compiled.delete(compiled.keys().next().value!);
    return prepared;
  };

  // Batons rotate every pipeline, so a stale or replayed baton can never reach a live stream.
  const streams = new Map<string, Stream>();
  const expired = new Map<string, string>(); // baton -> why, so a late client learns what happened
  let owner: Stream | null = null; // the stream entitled to the connection; null when free
  const waiters: { stream: Stream; resume: () => void }[] = [];
  let closed = false;

  function acquire(stream: Stream): Promise<void> | undefined {
    if (owner === stream) return undefined;
    if (owner === null) {
      owner = stream;
      return undefined;
    }
    return new Promise((resume) => waiters.push({ stream, resume }));
  }

  // Hands the connection straight to the next waiter, so nobody can slip in between it being
  // woken and it running.
  function release(stream: Stream): void {
    if (owner !== stream) return;
    const next = waiters.shift();
    owner = next?.stream ?? null;
    next?.resume();
  }

  function rememberExpired(baton: string, why: string): void {
    expired.set(baton, why);
    if (expired.size > 1000) expired.delete(expired.keys().next().value!);
  }

  function expire(stream: Stream, baton: string): void {
    streams.delete(baton);
    stream.closed = true;
    if (owner === stream && db.inTransaction) {
      db.exec("ROLLBACK");
      reopenIfFailed();
      log(`hrana: rolled back a transaction idle for ${idleMs} ms`);
      rememberExpired(baton, `The transaction expired: it was idle for more than ${idleMs} ms and was rolled back`);
    } else {
      rememberExpired(baton, `The stream expired: it was idle for more than ${idleMs} ms`);
    }
    release(stream);
  }

  function sqlOf(stream: Stream, req: { sql?: string | null; sql_id?: number | null }): string {
    if (typeof req.sql === "string") return req.sql;
    if (typeof req.sql_id === "number") {
      const sql = stream.sqls.get(req.sql_id);
      if (sql === undefined) throw new HranaError(`SQL text ${req.sql_id} is not stored`);
      return sql;
    }
    throw new HranaError("A statement needs sql or sql_id");
  }

  function execute(stream: Stream, stmt: ProtoStmt): StmtResult {
    const sql = sqlOf(stream, stmt);
    if (hasSeveralStatements(sql))
      throw new HranaError("SQL string contains more than one statement; use a batch or executeMultiple", "SQL_MANY_STATEMENTS");
    const params = bindParams(sql, stmt);
    const prepared = statement(sql);
    const before = (counters.get([]) as bigint[])[0];
    let cols: StmtResult["cols"] = [];
    let rows: ProtoValue[][] = [];
    try {
      if (prepared.reader) {
        cols = columnsOf(prepared);
        const raw = prepared.raw(true).all(params) as unknown[][];
        if (stmt.want_rows !== false) rows = raw.map((row) => row.map(encodeValue));
      } else {
        prepared.run(params);
        noticeSchemaChange();
      }
    } catch (error) {
      failed = true;
      throw error;
    }
    const [total, changes, rowid] = counters.get([]) as bigint[];
    // changes() keeps the count of the last INSERT/UPDATE/DELETE, so a SELECT or DDL would report
    // a stale one; total_changes() tells whether this statement changed anything at all.
    return { cols, rows, affected_row_count: total !== before ? Number(changes) : 0, last_insert_rowid: String(rowid) };
  }

  function batch(stream: Stream, steps: { condition?: ProtoCond | null; stmt: ProtoStmt }[]) {
    const results: (StmtResult | null)[] = [];
    const errors: (ProtoError | null)[] = [];
    const holds = (c: ProtoCond): boolean => {
      switch (c.type) {
        case "ok":
          return results[c.step] != null;
        case "error":
          return errors[c.step] != null;
        case "not":
          return !holds(c.cond);
        case "and":
          return c.conds.every(holds);
        case "or":
          return c.conds.some(holds);
        case "is_autocommit":
          return !db.inTransaction;
        default:
          throw new HranaError(`Unknown batch condition ${(c as { type: string }).type}`);
      }
    };
    for (const step of steps) {
      let result: StmtResult | null = null;
      let error: ProtoError | null = null;
      if (!step.condition || holds(step.condition)) {
        try {
          result = execute(stream, step.stmt);
        } catch (e) {
          error = toProtoError(e);
        }
      }
      results.push(result);
      errors.push(error);
    }
    return { step_results: results, step_errors: errors };
  }

  function closeStream(stream: Stream): void {
    stream.closed = true;
    if (owner === stream && db.inTransaction) db.exec("ROLLBACK");
  }

  function dispatch(stream: Stream, req: ProtoRequest): object {
    if (stream.closed) throw new HranaError("The stream is closed", "STREAM_CLOSED");
    switch (req.type) {
      case "execute":
        return { type: "execute", result: execute(stream, req.stmt) };
      case "batch":
        return { type: "batch", result: batch(stream, req.batch.steps) };
      case "sequence":
        db.exec(sqlOf(stream, req));
        noticeSchemaChange();
        return { type: "sequence" };
      case "describe":
        return { type: "describe", result: describe(sqlOf(stream, req)) };
      case "store_sql":
        stream.sqls.set(req.sql_id, req.sql);
        return { type: "store_sql" };
      case "close_sql":
        stream.sqls.delete(req.sql_id);
        return { type: "close_sql" };
      case "get_autocommit":
        return { type: "get_autocommit", is_autocommit: !db.inTransaction };
      case "close":
        closeStream(stream);
        return { type: "close" };
      default:
        throw new HranaError(`Unknown request type ${(req as { type: string }).type}`);
    }
  }

  function describe(sql: string) {
    const prepared = db.prepare(sql);
    const { names } = scanParams(sql);
    return {
      params: names.map((name) => ({ name })),
      cols: prepared.reader ? prepared.columns().map((c) => ({ name: c.name, decltype: c.type })) : [],
      is_explain: /^\s*EXPLAIN\b/i.test(sql),
      // libsql does not expose sqlite3_stmt_readonly, so this is a guess from the leading keyword.
      is_readonly:
        /^\s*(SELECT|VALUES|EXPLAIN)\b/i.test(sql) || (/^\s*WITH\b/i.test(sql) && !/\b(INSERT|UPDATE|DELETE|REPLACE)\b/i.test(sql)),
    };
  }

  async function pipeline(text: string): Promise<Answer> {
    let body: { baton?: string | null; requests: ProtoRequest[] };
    try {
      body = JSON.parse(text) as typeof body;
      if (!Array.isArray(body?.requests)) throw new Error("requests must be an array");
    } catch (e) {
      return httpError(400, `Invalid pipeline request: ${(e as Error).message}`);
    }
    let stream: Stream | undefined;
    if (body.baton == null) {
      stream = { sqls: new Map(), closed: false };
    } else {
      stream = streams.get(body.baton);
      if (!stream) return httpError(400, expired.get(body.baton) ?? "Unknown or expired baton", "STREAM_EXPIRED");
      streams.delete(body.baton);
      clearTimeout(stream.timer);
    }
    const s = stream;
    const requests = body.requests;
    const deadline = Date.now() + busyWaitMs;
    for (let attempt = 0; ; attempt++) {
      await acquire(s);
      if (closed) return httpError(503, "The database server is shutting down", "SERVER_CLOSED");
      noticeSchemaChange();
      const started = (counters.get([]) as bigint[])[0];
      const results = requests.map((req) => {
        try {
          return { type: "ok" as const, response: dispatch(s, req) };
        } catch (e) {
          return { type: "error" as const, error: toProtoError(e) };
        }
      });
      // Another process's lock, met before anything changed and outside a transaction: the
      // pipeline did nothing and is tried again shortly, the connection free for others meanwhile.
      const metLock = results.some((r) => isBusy(r.type === "error" ? r.error : stepErrors(r.response)));
      const unchanged = (counters.get([]) as bigint[])[0] === started;
      reopenIfFailed();
      if (metLock && !db.inTransaction && unchanged && Date.now() < deadline && !closed) {
        s.closed = false;
        release(s);
        await new Promise((resume) => setTimeout(resume, BUSY_RETRY_MS[Math.min(attempt, BUSY_RETRY_MS.length - 1)]));
        continue;
      }
      return finishPipeline(s, results);
    }
  }

  /** Opens the connection afresh after a statement failed, once no transaction is open (see above). */
  function reopenIfFailed(): void {
    if (!failed || db.inTransaction || closed) return;
    failed = false;
    // Most failures (a constraint) leave nothing running; only one that does costs a reopen.
    const running = (db.prepare("SELECT count(*) FROM sqlite_stmt WHERE busy").raw(true).get([]) as number[])[0] ?? 0;
    if (running <= 1) return; // the count itself
    log(`hrana: ${running - 1} failed statement(s) left running; reopening the connection`);
    db.close();
    compiled.clear();
    ({ connection: db, counters, schemaVersionStatement } = open());
    knownSchema = schemaVersion();
  }

  function finishPipeline(s: Stream, results: object[]): Answer {
    try {
      let baton: string | null = null;
      if (!s.closed) {
        const next = (baton = randomUUID());
        streams.set(next, s);
        s.timer = setTimeout(() => expire(s, next), idleMs);
        s.timer.unref();
      }
      return json({ baton, base_url: null, results });
    } finally {
      // A pipeline that leaves a transaction open keeps the connection for its stream.
      if (!db.inTransaction) release(s);
    }
  }

  async function answer(method: string, pathname: string, body: string): Promise<Answer> {
    const path = pathname.replace(/\/+$/, "");
    try {
      if (closed) return httpError(503, "The database server is closed", "SERVER_CLOSED");
      if (path === "/v2" && method === "GET") return { status: 200, headers: TEXT_HEADERS, body: "Hrana v2 (local bridge)\n" };
      if (path === "/v2/pipeline" && method === "POST") return await pipeline(body);
      return { status: 404, headers: TEXT_HEADERS, body: "Not found\n" }; // includes /v3*, so the client falls back to v2
    } catch (e) {
      log(`hrana: ${(e as Error).stack ?? String(e)}`);
      return httpError(500, (e as Error).message, "INTERNAL_ERROR");
    }
  }

  return {
    async handle(request) {
      const result = await answer(request.method, new URL(request.url).pathname, request.method === "POST" ? await request.text() : "");
      return new Response(result.body, { status: result.status, headers: result.headers });
    },
    answer,
    compiledCount: () => compiledTotal,
    close() {
      if (closed) return;
      closed = true;
      for (const stream of streams.values()) clearTimeout(stream.timer);
      streams.clear();
      try {
        if (db.inTransaction) db.exec("ROLLBACK");
      } finally {
        db.close();
        owner = null;
        // Queued pipelines wake up, see `closed` and answer 503 instead of hanging forever.
        for (const waiter of waiters.splice(0)) waiter.resume();
      }
    },
  };
}

function decodeValue(v: ProtoValue): SqlValue {
  switch (v?.type) {
    case "null":
      return null;
    case "integer":
      if (!/^-?\d+$/.test(String(v.value))) throw new HranaError(`Invalid integer ${JSON.stringify(v.value)}`);
      return BigInt(v.value);
    case "float":
      if (typeof v.value !== "number") throw new HranaError("A float value must be a JSON number");
      return v.value;
    case "text":
      return String(v.value);
    case "blob":
      return Buffer.from(v.base64 ?? "", "base64");
    default:
      throw new HranaError(`Unknown value type ${JSON.stringify((v as { type?: unknown })?.type)}`);
  }
}

function encodeValue(v: unknown): ProtoValue {
  if (v === null || v === undefined) return { type: "null" };
  if (typeof v === "bigint") return { type: "integer", value: v.toString() };
  if (typeof v === "number") return { type: "float", value: v };
  if (typeof v === "string") return { type: "text", value: v };
  if (v instanceof ArrayBuffer) return { type: "blob", base64: Buffer.from(v).toString("base64") };
  if (ArrayBuffer.isView(v)) return { type: "blob", base64: Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString("base64") };
  throw new HranaError(`Cannot encode a ${typeof v} value`);
}

/*
 * libsql binds an array by index and an object by each parameter's name minus its prefix (`:x` and
 * `?3` look up "x" and "3"). Its object path aborts the whole process on an anonymous `?`, so that
 * combination is refused before it reaches the native code.
 */
function bindParams(sql: string, stmt: ProtoStmt): SqlValue[] | Record<string, SqlValue> {
  const positional = (stmt.args ?? []).map(decodeValue);
  if (!stmt.named_args?.length) return positional;
  if (scanParams(sql).anonymous) throw new HranaError("Named arguments cannot be combined with anonymous ? parameters", "ARGS_INVALID");
  const named: Record<string, SqlValue> = Object.create(null); // no inherited keys for the native lookup to find
  positional.forEach((value, i) => (named[String(i + 1)] = value));
  for (const { name, value } of stmt.named_args) named[name.replace(/^[:@$?]/, "")] = decodeValue(value);
  return named;
}

// Literals, quoted identifiers and comments are matched first so a `?` or `:x` inside them is skipped.
const SQL_TOKENS = /'(?:[^']|'')*'|"(?:[^"]|"")*"|`(?:[^`]|``)*`|\[[^\]]*\]|--[^\n]*|\/\*[\s\S]*?(?:\*\/|$)|\?(\d*)|([:@$][A-Za-z0-9_]+)/g;

const QUOTED_OR_COMMENT = /'(?:[^']|'')*'|"(?:[^"]|"")*"|`(?:[^`]|``)*`|\[[^\]]*\]|--[^\n]*|\/\*[\s\S]*?(?:\*\/|$)/g;

/**
 * True when `sql` holds more than one statement. libsql would silently run only the first, so
 * such an execute is refused, as sqld does. A trigger's body is one statement despite its `;`s.
 */
function hasSeveralStatements(sql: string): boolean {
  const bare = sql.replace(QUOTED_OR_COMMENT, " ");
  if (/^\s*CREATE\s+(TEMP\s+|TEMPORARY\s+)?TRIGGER\b/i.test(bare)) return false;
  return /;\s*[^\s;]/.test(bare);
}

/** Parameter names by index as SQLite numbers them (null for `?`), and whether a bare `?` occurs. */
function scanParams(sql: string): { names: (string | null)[]; anonymous: boolean } {
  const names: (string | null)[] = [];
  let anonymous = false;
  for (const [, digits, name] of sql.matchAll(SQL_TOKENS)) {
    if (digits === "") {
      anonymous = true;
      names.push(null);
    } else if (digits !== undefined) names[Number(digits) - 1] = `?${digits}`;
    else if (name !== undefined && !names.includes(name)) names.push(name);
  }
  return { names: Array.from(names, (n) => n ?? null), anonymous };
}

/** Whether an error (or any of a batch's step errors) is another connection's lock: SQLITE_BUSY or SQLITE_LOCKED and their extended codes. */
function isBusy(error: ProtoError | (ProtoError | null)[] | null | undefined): boolean {
  if (!error) return false;
  if (Array.isArray(error)) return error.some((e) => isBusy(e));
  return /^SQLITE_(BUSY|LOCKED)/.test(error.code ?? "");
}

/** The step errors of a batch response, if it is one. */
function stepErrors(response: object): (ProtoError | null)[] | null {
  const result = (response as { type?: string; result?: { step_errors?: (ProtoError | null)[] } }).result;
  return (response as { type?: string }).type === "batch" ? (result?.step_errors ?? null) : null;
}

function toProtoError(e: unknown): ProtoError {
  const { message, code } = (e ?? {}) as { message?: unknown; code?: unknown };
  return { message: typeof message === "string" ? message : String(e), ...(typeof code === "string" ? { code } : {}) };
}

/**
 * Serves `server.handle` over plain HTTP: to the local Worker (as an external service binding,
 * which workerd reaches directly) and to tests. With `authToken`, every request must carry
 * `Authorization: Bearer <authToken>`, as libSQL servers require, so other local users cannot
 * reach the database through the loopback port.
 */
export function serveHranaOverHttp(
  server: HranaServer,
  port: number,
  host = "127.0.0.1",
  options: { authToken?: string; opensAfter?: Promise<unknown> } = {},
): Promise<{ url: string; port: number; close(): Promise<void> }> {
  const expected = options.authToken ? Buffer.from(`Bearer ${options.authToken}`) : null;
  // Requests that come before `opensAfter` settles wait for it (the schema's migrations at start);
  // if it fails they get 503 with its message. After, a flag, not an await on every request.
  let open = options.opensAfter === undefined;
  let failed: string | null = null;
  options.opensAfter?.then(
    () => (open = true),
    (error: unknown) => (failed = (error as Error).message ?? String(error)),
  );
  const unavailable = (res: ServerResponse, why: string) =>
    res.writeHead(503, JSON_HEADERS).end(JSON.stringify({ message: `the database is not open: ${why}`, code: "UNAVAILABLE" }));
  const http = createServer((req, res) => {
    const given = Buffer.from(req.headers.authorization ?? "");
    if (expected && (given.length !== expected.length || !timingSafeEqual(given, expected))) {
      res.writeHead(401, JSON_HEADERS).end(JSON.stringify({ message: "Missing or wrong auth token", code: "AUTH_FAILED" }));
      return;
    }
    if (open) void forward(server, req, res);
    else if (failed !== null) unavailable(res, failed);
    else
      void options.opensAfter!.then(
        () => forward(server, req, res),
        () => unavailable(res, failed ?? "its start failed"),
      );
  });
  http.keepAliveTimeout = 60_000;
  return new Promise((resolve, reject) => {
    http.once("error", reject);
    http.listen(port, host, () => {
      const { port: bound } = http.address() as AddressInfo;
      resolve({
        url: `http://${host.includes(":") ? `[${host}]` : host}:${bound}`,
        port: bound,
        close: () =>
          new Promise<void>((done, fail) => {
            http.close((err) => (err ? fail(err) : done()));
            http.closeAllConnections(); // keep-alive sockets would otherwise hold close() open
          }),
      });
    });
  });
}

// Events rather than `for await`: the async iterator costs more than the tiny bodies it reads.
function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => resolve(chunks.length === 1 ? chunks[0]!.toString("utf8") : Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

async function forward(server: HranaServer, req: IncomingMessage, res: ServerResponse): Promise<void> {
  try {
    const body = await readBody(req);
    const url = req.url ?? "/";
    const query = url.search(/[?#]/);
    const result = await server.answer(req.method ?? "GET", query === -1 ? url : url.slice(0, query), body);
    res.writeHead(result.status, result.headers);
    res.end(result.body);
  } catch (e) {
    if (!res.headersSent) res.writeHead(500, { "content-type": "text/plain" });
    res.end(String(e));
  }
}
