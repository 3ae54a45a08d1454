import type { ServiceError } from "../api";

/**
 * An API error shown where it happened: the service's detail, and each invalid field of a 422.
 * `role="alert"` makes screen readers announce it.
 */
export function ErrorNote({ error, id }: { error: ServiceError | null | undefined; id?: string }) {
  if (!error) return null;
  return (
    <div class="error" role="alert" id={id}>
      <p>{error.status === 0 ? `Cannot reach the service: ${error.detail}` : error.detail}</p>
      {error.fields?.length ? (
        <ul>
          {error.fields.map((field) => (
            <li key={field.path}>
              <code>{field.path}</code>: {field.message}
            </li>
          ))}
        </ul>
      ) : null}
    </div>
  );
}
