import { QueueEntry } from "../../shared/schemas/queue";
import { UsageError } from "./output";

/** The fields of a queue entry that `jobs list -o` selects, besides `metadata.<key>` paths. */
export const ENTRY_FIELDS = Object.keys(QueueEntry.shape) as (keyof QueueEntry)[];

/**
 * Parses `-o job_id,status,metadata.run_name` into its field paths, in order: each a field of a
 * queue entry or a dot path into `metadata` (any depth). Anything else is a usage error that
 * lists the valid fields.
 *
 * @example
 * parseFields("job_id, metadata.run_name"); // ["job_id", "metadata.run_name"]
 */
export function parseFields(spec: string): string[] {
  const fields = spec.split(",").map((field) => field.trim());
  for (const field of fields) {
    const known = (ENTRY_FIELDS as string[]).includes(field) || /^metadata(\.[^.]+)+$/.test(field);
    if (!known)
      throw new UsageError(
        `unknown field ${JSON.stringify(field)} in -o; valid fields: ${ENTRY_FIELDS.join(", ")}, and metadata.<key> (any depth: metadata.a.b)`,
      );
  }
  return fields;
}

/**
 * The value at a field path of an entry (`metadata.a.b` walks into nested objects), or null when
 * it is absent: another user's job shows only its public fields, and metadata keys are optional.
 *
 * @example
 * fieldValue({ metadata: { run: { name: "x" } } }, "metadata.run.name"); // "x"
 */
export function fieldValue(entry: object, path: string): unknown {
  let value: unknown = entry;
  for (const key of path.split(".")) {
    if (value === null || typeof value !== "object" || !Object.hasOwn(value, key)) return null;
    value = (value as Record<string, unknown>)[key];
  }
  return value ?? null;
}

/** Exactly the selected fields of an entry, keyed as they were written (`"metadata.run_name"`). */
export function selectFields(entry: object, fields: string[]): Record<string, unknown> {
  return Object.fromEntries(fields.map((field) => [field, fieldValue(entry, field)]));
}
