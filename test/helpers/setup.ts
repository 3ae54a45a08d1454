// vitest's setup file (vitest.config.ts setupFiles): runs in every test file before its own code.
import { afterAll } from "vitest";
import { stopLeftRunning } from "./cleanup";

// Registered before the file's own hooks, so it runs after them (after-hooks run in reverse):
// whatever the file did not stop itself (a test or beforeAll that threw) is stopped here.
afterAll(stopLeftRunning, 120_000);
