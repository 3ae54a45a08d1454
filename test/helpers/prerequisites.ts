/**
 * Whether a tool a suite needs is on this machine. Without it a developer's run skips that suite
 * (and says so in its name); under CI=true (`.ci/run` sets it) a missing tool fails the run
 * instead, so CI is never green with a suite that did not run.
 *
 * @example
 * describe.skipIf(!prerequisite("bubblewrap (bwrap)", findProgram("bwrap", process.env.PATH ?? "") !== null))("the sandbox", () => {});
 */
export function prerequisite(name: string, present: boolean): boolean {
  if (!present && process.env.CI === "true")
    throw new Error(`${name} is not installed: under CI=true the suites that need it fail instead of skipping (.ci/run installs it)`);
  return present;
}
