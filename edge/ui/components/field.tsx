import type { ComponentChildren } from "preact";

/**
 * A labelled control: the label wraps the control, so every input, select and textarea has an
 * accessible name; `hint` is read after it.
 *
 * @example
 * <Field label="Username"><input name="username" required /></Field>
 */
export function Field({ label, hint, children }: { label: string; hint?: string; children: ComponentChildren }) {
  return (
    <label class="field">
      <span class="field-label">{label}</span>
      {children}
      {hint ? <span class="field-hint">{hint}</span> : null}
    </label>
  );
}

/** A form's values by field name, as strings. */
export function formValues(form: HTMLFormElement): Record<string, string> {
  return Object.fromEntries([...new FormData(form)].map(([k, v]) => [k, String(v)]));
}
