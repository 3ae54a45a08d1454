import type { ComponentChildren } from "preact";
import { useEffect, useRef } from "preact/hooks";

let viewsShown = 0;

/**
 * One view: its heading (focused when another view opens, so keyboard and screen-reader users land
 * on it), optional actions beside it, and its content.
 */
export function Page({ title, actions, children }: { title: string; actions?: ComponentChildren; children: ComponentChildren }) {
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => {
    document.title = `${title} · Training service`;
    // Not on the page's first view: there the first Tab must still reach the skip link.
    if (viewsShown++ > 0) heading.current?.focus({ preventScroll: true });
  }, [title]);
  return (
    <section class="page" aria-labelledby="page-title">
      <header class="page-header">
        <h1 id="page-title" tabIndex={-1} ref={heading}>
          {title}
        </h1>
        {actions ? <div class="page-actions">{actions}</div> : null}
      </header>
      {children}
    </section>
  );
}

/** A titled part of a view. */
export function Panel({ title, children, id }: { title: string; children: ComponentChildren; id?: string }) {
  const headingId = `${id ?? title.toLowerCase().replace(/[^a-z0-9]+/g, "-")}-title`;
  return (
    <section class="panel" aria-labelledby={headingId} id={id}>
      <h2 id={headingId}>{title}</h2>
      {children}
    </section>
  );
}
