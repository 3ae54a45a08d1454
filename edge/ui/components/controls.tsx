import type { ComponentChildren } from "preact";
import { useState } from "preact/hooks";
import type { ServiceError } from "../api";
import { ErrorNote } from "./error-note";

/**
 * A secret the service shows only once (a worker token, an API key): in a code block a person can
 * select, with a button that copies it, and the warning that it will not be shown again.
 */
export function OnceSecret({ title, value, children }: { title: string; value: string; children?: ComponentChildren }) {
  const [copied, setCopied] = useState<"" | "copied" | "select">("");
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(value);
      setCopied("copied");
    } catch {
      setCopied("select");
    }
  };
  return (
    <div class="once-secret notice" role="status">
      <p>
        <strong>{title}</strong> It is shown only now: copy it and keep it somewhere safe.
      </p>
      <pre class="secret" tabIndex={0} aria-label={title}>
        <code>{value}</code>
      </pre>
      <div class="row">
        <button type="button" onClick={() => void copy()}>
          Copy
        </button>
        <span aria-live="polite" class="muted">
          {copied === "copied" ? "Copied." : copied === "select" ? "The browser refused: select the text and copy it." : ""}
        </span>
      </div>
      {children}
    </div>
  );
}

/**
 * A destructive button with a confirm step: the first press asks (naming what happens), the
 * second does it; "Keep" backs out. The action's error shows beside it.
 */
export function ConfirmButton({
  label,
  name,
  question,
  confirmLabel,
  onConfirm,
  busy,
  error,
}: {
  label: string;
  /** The button's accessible name, starting with `label` (which of many rows it acts on). */
  name: string;
  question: string;
  confirmLabel: string;
  onConfirm: () => Promise<unknown>;
  busy: boolean;
  error: ServiceError | null;
}) {
  const [asking, setAsking] = useState(false);
  return (
    <div class="confirm">
      {asking ? (
        <div class="confirm-ask" role="group" aria-label={question}>
          <span>{question}</span>
          <button
            type="button"
            class="danger"
            disabled={busy}
            onClick={() => {
              void onConfirm().then(() => setAsking(false));
            }}
          >
            {confirmLabel}
          </button>
          <button type="button" onClick={() => setAsking(false)}>
            Keep
          </button>
        </div>
      ) : (
        <button type="button" class="danger" aria-label={name} onClick={() => setAsking(true)}>
          {label}
        </button>
      )}
      <ErrorNote error={error} />
    </div>
  );
}
