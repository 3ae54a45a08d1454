/** Files embedded gzip-compressed, in base64, by the Worker bundler (edge/local/bundle.ts, the `gzip-asset:` plugin). */
declare module "gzip-asset:*" {
  const gzipBase64: string;
  export default gzipBase64;
}

/** Markdown files embedded as text by the Worker bundler (edge/local/bundle.ts): the API document's prose. */
declare module "*.md" {
  const text: string;
  export default text;
}

/** The dashboard built from edge/ui (edge/local/ui-build.ts): its script, stylesheet and version. */
declare module "ui-build:dashboard" {
  const dashboard: { js: string; css: string; version: string };
  export default dashboard;
}
