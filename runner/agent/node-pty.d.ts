// node-pty is installed as the alias "node-pty": "npm:@lydell/node-pty" (prebuilt binaries, so no
// compiler is needed on a GPU box); its types declare the module under the package's own name.
/// <reference path="../../node_modules/node-pty/node-pty.d.ts" />
declare module "node-pty" {
  export * from "@lydell/node-pty";
}
