import { execFileSync } from "node:child_process";
import { chmodSync, cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";

/*
 * A SimpleTuner installation as an operator makes one, with the stand-in in place of the real
 * package (test/fakes/simpletuner/): a real Python virtual environment (`python3 -m venv`) whose
 * site-packages holds the `simpletuner` package (its train.py the stand-in, the recordings of
 * test/fixtures/simpletuner/ beside it) and whose bin/accelerate is the stand-in launcher, a
 * console script of that venv's Python. The runner config names it as it would a real one
 * (`"simpletuner": "<dir>"`), and the runner's probe imports it as it would the real one.
 *
 * It lives under the checkout's .build/ (git-ignored): the sandbox hides /tmp and the runner's
 * work directory, and the trainer must see its installation.
 */

const FAKES = resolve("test/fakes/simpletuner");
const RECORDINGS = resolve("test/fixtures/simpletuner");
const made: string[] = [];

/**
 * Makes a fake SimpleTuner installation and answers its folder (what the runner config's
 * `simpletuner` names).
 *
 * @example
 * const venv = fakeSimpleTuner(); // ".../.build/fake-simpletuner/venv-abc123"
 * writeFileSync(configFile, JSON.stringify({ simpletuner: venv }));
 */
export function fakeSimpleTuner(): string {
  const root = resolve(".build/fake-simpletuner");
  mkdirSync(root, { recursive: true });
  const venv = mkdtempSync(join(root, "venv-"));
  // Readable by the user trainers run as (nobody, when the runner is root), as an installation is.
  chmodSync(venv, 0o755);
  made.push(venv);
  execFileSync("python3", ["-m", "venv", "--without-pip", venv], { stdio: "pipe" });
  const python = join(venv, "bin", "python");
  const sitePackages = execFileSync(python, ["-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], {
    encoding: "utf8",
  }).trim();
  cpSync(join(FAKES, "simpletuner"), join(sitePackages, "simpletuner"), { recursive: true });
  cpSync(RECORDINGS, join(sitePackages, "simpletuner", "recordings"), { recursive: true });
  const accelerate = join(venv, "bin", "accelerate");
  writeFileSync(accelerate, `#!${python}\n${readFileSync(join(FAKES, "accelerate.py"), "utf8")}`);
  chmodSync(accelerate, 0o755);
  return venv;
}

/** Removes the installations this process made. */
export function removeFakeSimpleTuners(): void {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
}
