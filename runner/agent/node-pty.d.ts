// node-pty is installed as the alias "node-pty": "npm:@lydell/node-pty" (prebuilt binaries, see
// STACK.md); its types declare the module under the package's own name.
/// <reference path="../../node_modules/node-pty/node-pty.d.ts" />
declare module "node-pty" {
  export * from "@lydell/node-pty";
}
