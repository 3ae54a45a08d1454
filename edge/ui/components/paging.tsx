import { useState } from "preact/hooks";
import { Field } from "./field";

/**
 * Walking a cursor-paged list (the API's `next_cursor`): the cursors of the pages walked so far,
 * forgotten when `resetKey` (the filters) changes, so a new filter starts on its first page.
 *
 * @example
 * const pages = useCursorPages(JSON.stringify(filters));
 * const list = useLoad(() => call(endpoints.auditList, { query: { cursor: pages.cursor } }), [pages.cursor]);
 * <button disabled={!list.data?.next_cursor} onClick={() => pages.forward(list.data!.next_cursor!)}>Older</button>
 */
export function useCursorPages(resetKey = "") {
  const [walk, setWalk] = useState<{ key: string; cursors: string[] }>({ key: resetKey, cursors: [] });
  const cursors = walk.key === resetKey ? walk.cursors : [];
  return {
    /** This page's cursor; undefined on the first page. */
    cursor: cursors.at(-1),
    /** How many pages lie before this one. */
    index: cursors.length,
    first: () => setWalk({ key: resetKey, cursors: [] }),
    back: () => setWalk({ key: resetKey, cursors: cursors.slice(0, -1) }),
    forward: (next: string) => setWalk({ key: resetKey, cursors: [...cursors, next] }),
  };
}

/** The "Per page" select of a paged list. */
export function PageSizeField({ sizes, value, onChange }: { sizes: readonly string[]; value: string; onChange: (size: string) => void }) {
  return (
    <Field label="Per page">
      <select name="limit" value={value} onChange={(event) => onChange(event.currentTarget.value)}>
        {sizes.map((size) => (
          <option key={size} value={size}>
            {size}
          </option>
        ))}
      </select>
    </Field>
  );
}
