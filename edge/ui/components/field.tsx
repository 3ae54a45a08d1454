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

/**
 * A text control with its label, its hint, and the API's refusal of this very field beside it
 * (linked by aria-describedby, marked aria-invalid). `children` gets the control's id and aria
 * attributes.
 *
 * @example
 * <FieldWithError id="smtp-host" label="Host" error={errors.host}>{(aria) => <input {...aria} name="host" />}</FieldWithError>
 */
export function FieldWithError({
  id,
  label,
  hint,
  error,
  children,
}: {
  id: string;
  label: string;
  hint?: string;
  error: string | undefined;
  children: (aria: Record<string, string | undefined>) => ComponentChildren;
}) {
  const describedBy = [hint ? `${id}-hint` : "", error ? `${id}-error` : ""].filter(Boolean).join(" ") || undefined;
  return (
    <div class="field">
      <label class="field-label" for={id}>
        {label}
      </label>
      {children({ id, "aria-describedby": describedBy, "aria-invalid": error ? "true" : undefined })}
      {hint ? (
        <span class="field-hint" id={`${id}-hint`}>
          {hint}
        </span>
      ) : null}
      <FieldError id={id} error={error} />
    </div>
  );
}

/**
 * The API's refusal of one field, beside it: its id is `${id}-error`, for the control's
 * aria-describedby. Nothing when there is none.
 *
 * @example
 * <FieldError id="ds0-resolution" error={errors["ds0-resolution"]} />
 */
export function FieldError({ id, error }: { id: string; error: string | undefined }) {
  return error ? (
    <p class="field-error" id={`${id}-error`}>
      {error}
    </p>
  ) : null;
}

/** A form's values by field name, as strings. */
export function formValues(form: HTMLFormElement): Record<string, string> {
  return Object.fromEntries([...new FormData(form)].map(([k, v]) => [k, String(v)]));
}
