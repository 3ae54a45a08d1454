import type { Config, LogLevel } from "./config";

const RANK: Record<LogLevel, number> = { DEBUG: 10, INFO: 20, WARNING: 30, ERROR: 40 };
const SECRET_KEY = /pass(word)?|secret|token|api[-_]?key|authorization|cookie|credential/i;
const SECRET_VALUE = /\bst_[A-Za-z0-9_-]{20,}|\bBearer\s+\S+/g;

export type LogExtra = Record<string, unknown>;

export interface Logger {
  debug(message: string, extra?: LogExtra): void;
  info(message: string, extra?: LogExtra): void;
  warning(message: string, extra?: LogExtra): void;
  error(message: string, extra?: LogExtra): void;
  /** The same logger, stamping every line with this request's correlation id. */
  withCorrelation(correlationId: string): Logger;
}

/**
 * Masks anything that looks like a credential: values under secret-sounding keys, API keys
 * (`st_…`) and bearer tokens anywhere in strings. Logs are shipped and kept; credentials never
 * belong in them.
 */
export function redact(value: unknown, key = ""): unknown {
  if (key && SECRET_KEY.test(key)) return "[REDACTED]";
  if (typeof value === "string") return value.replace(SECRET_VALUE, "[REDACTED]");
  if (Array.isArray(value)) return value.map((item) => redact(item));
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, redact(v, k)]));
  }
  return value;
}

// The caller's function and line, from the stack: cheap enough for the few lines a request logs.
function callerSource(file: string): { file: string; line: number | null; function: string | null } {
  const frame = new Error().stack?.split("\n")[4] ?? "";
  const match = /at (?:(\S+) )?\(?.*?:(\d+):\d+\)?$/.exec(frame.trim());
  return { file, line: match?.[2] ? Number(match[2]) : null, function: match?.[1] ?? null };
}

/**
 * A structured logger: JSON lines (timestamp, level, logger, message,
 * correlation_id, source, extra) or plain text, filtered by SERVICE_LOG_LEVEL.
 *
 * @example
 * const log = createLogger("edge/routes/auth.ts", config).withCorrelation(requestId);
 * log.info("login succeeded", { user_id: 7 });
 */
export function createLogger(
  name: string,
  config: Pick<Config, "logLevel" | "logFormat">,
  correlationId: string | null = null,
  sink: (line: string, level: LogLevel) => void = (line, level) => (level === "ERROR" ? console.error(line) : console.log(line)),
): Logger {
  const threshold = RANK[config.logLevel];
  const write = (level: LogLevel, message: string, extra: LogExtra = {}) => {
    if (RANK[level] < threshold) return;
    const safeMessage = redact(message) as string;
    const safeExtra = redact(extra) as LogExtra;
    const timestamp = new Date().toISOString();
    const line =
      config.logFormat === "json"
        ? JSON.stringify({
            timestamp,
            level,
            logger: name,
            message: safeMessage,
            correlation_id: correlationId,
            source: callerSource(name),
            extra: safeExtra,
          })
        : `${timestamp} ${level.padEnd(7)} ${name} [${correlationId ?? "-"}] ${safeMessage}${Object.keys(safeExtra).length ? " " + JSON.stringify(safeExtra) : ""}`;
    sink(line, level);
  };
  return {
    debug: (m, e) => write("DEBUG", m, e),
    info: (m, e) => write("INFO", m, e),
    warning: (m, e) => write("WARNING", m, e),
    error: (m, e) => write("ERROR", m, e),
    withCorrelation: (id) => createLogger(name, config, id, sink),
  };
}
