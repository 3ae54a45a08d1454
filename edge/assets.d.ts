/** Files embedded as text by the Worker bundler (edge/local/bundle.ts, the `asset:` plugin). */
declare module "asset:*" {
  const text: string;
  export default text;
}
