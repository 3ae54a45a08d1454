import { useState } from "preact/hooks";
import "./settings.css";

/** What a settings form edits: each control's text (or checkbox state), keyed by field name. */
export type Draft = Record<string, string | boolean>;

/**
 * A form's editable copy of loaded settings: reset whenever the loaded value changes (after a
 * save, the service's answer), edited field by field.
 *
 * @example
 * const [draft, set] = useDraft(limits.data, toDraft);
 * <input value={draft.max_concurrent as string} onInput={(e) => set("max_concurrent", e.currentTarget.value)} />
 */
export function useDraft<T>(loaded: T | undefined, toDraft: (value: T) => Draft): [Draft, (name: string, value: string | boolean) => void] {
  // The draft is derived during the render that first sees a loaded value (not in an effect after
  // it): the form never paints empty controls that fill in a frame later, over what was typed.
  const [state, setState] = useState<{ source: T | undefined; draft: Draft }>(() => ({
    source: loaded,
    draft: loaded === undefined ? {} : toDraft(loaded),
  }));
  let current = state;
  if (state.source !== loaded) {
    current = { source: loaded, draft: loaded === undefined ? state.draft : toDraft(loaded) };
    setState(current);
  }
  return [current.draft, (name, value) => setState((now) => ({ ...now, draft: { ...now.draft, [name]: value } }))];
}

/** A number field's text as the API takes it: empty is null (the field's "none"). */
export function numberOrNull(text: string | boolean | undefined): number | null {
  const trimmed = String(text ?? "").trim();
  if (trimmed === "") return null;
  // Text that is no number goes as it is: the API refuses it with a message naming the field.
  return Number.isFinite(Number(trimmed)) ? Number(trimmed) : (trimmed as unknown as number);
}

/** A text field's value as the API takes it: empty is null (the field's default). */
export const textOrNull = (text: string | boolean | undefined): string | null => (String(text ?? "").trim() === "" ? null : String(text));

/** A list field's text as the API takes it: one entry per line, blank lines and surrounding spaces dropped. */
export const linesOf = (text: string | boolean | undefined): string[] =>
  String(text ?? "")
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter(Boolean);

/** A loaded number as a control's text (null shows empty). */
export const numberText = (value: number | null | undefined): string => (value === null || value === undefined ? "" : String(value));

/** The fields of `next` that differ from `previous`: what a Save sends, so the audit trail names only real changes. */
export function changedOnly<T extends Record<string, unknown>>(previous: Record<string, unknown>, next: T): Partial<T> {
  const out: Partial<T> = {};
  for (const key of Object.keys(next) as (keyof T & string)[]) {
    if (JSON.stringify(previous[key] ?? null) !== JSON.stringify(next[key] ?? null)) out[key] = next[key];
  }
  return out;
}

/** A success note after a save (announced politely); `message` null shows nothing. */
export function SavedNote({ message }: { message: string | null }) {
  return (
    <p class="saved-note" role="status">
      {message ?? ""}
    </p>
  );
}

/** A text input bound to a draft field. */
export function TextInput({
  draft,
  set,
  name,
  type = "text",
  ...rest
}: {
  draft: Draft;
  set: (name: string, value: string) => void;
  name: string;
  type?: "text" | "number" | "url";
  step?: string;
  min?: number;
  placeholder?: string;
  inputMode?: "numeric" | "decimal";
}) {
  return (
    <input
      name={name}
      // Preact types each input type's attributes apart; these fit all three.
      type={type as "text"}
      value={(draft[name] as string | undefined) ?? ""}
      onInput={(event) => set(name, event.currentTarget.value)}
      autoComplete="off"
      {...rest}
    />
  );
}

/** A textarea bound to a draft field (a list edited one entry per line; see `linesOf`). */
export function TextArea({
  draft,
  set,
  name,
  rows = 3,
  placeholder,
}: {
  draft: Draft;
  set: (name: string, value: string) => void;
  name: string;
  rows?: number;
  placeholder?: string;
}) {
  return (
    <textarea
      name={name}
      rows={rows}
      placeholder={placeholder}
      spellcheck={false}
      autoComplete="off"
      value={(draft[name] as string | undefined) ?? ""}
      onInput={(event) => set(name, event.currentTarget.value)}
    />
  );
}

/** A checkbox bound to a draft field, its label beside it. */
export function CheckBox({
  draft,
  set,
  name,
  label,
  hint,
}: {
  draft: Draft;
  set: (name: string, value: boolean) => void;
  name: string;
  label: string;
  hint?: string;
}) {
  return (
    <label class="check">
      <input type="checkbox" name={name} checked={draft[name] === true} onChange={(event) => set(name, event.currentTarget.checked)} />
      <span>
        {label}
        {hint ? <span class="field-hint"> {hint}</span> : null}
      </span>
    </label>
  );
}
