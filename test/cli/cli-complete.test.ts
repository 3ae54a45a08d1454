// Completion of job ids and environment names from the service: the hidden `jobs __complete
// <kind>` against the real local stack, and the bash script that calls it (through the program's
// alias, never the shell's own `jobs`). Nothing is offered, and nothing is printed, when the
// service cannot be reached or the key is missing or revoked.
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { chmodSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jobs } from "../helpers/cli";
import { freePort } from "../helpers/ports";
import { createUserWithKey, setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";

let t: TestStack;
let admin: { key: string; cookie: string };
let alice: { key: string; id: number };
let aliceJobs: string[];
const bin = mkdtempSync(join(tmpdir(), "cli-complete-bin-"));

const http = async (method: string, path: string, who: { key: string }, json?: unknown) => {
  const reply = await t.call(method, path, { auth: { key: who.key }, ...(json === undefined ? {} : { json }) });
  if (reply.status >= 300) throw new Error(`${method} ${path}: ${reply.status} ${reply.text}`);
  return reply.body;
};
const complete = (kind: string, env: NodeJS.ProcessEnv) => jobs(["__complete", kind], { env });
const asAlice = () => ({ SERVICE_URL: t.base, SERVICE_API_KEY: alice.key });

const run = promisify(execFile);

/**
 * What bash's completion offers for `words` (the last one being completed), the script sourced
 * first. Asynchronously: the stack answers from this very process.
 */
async function bashOffers(words: string[], prelude = "", env: NodeJS.ProcessEnv = asAlice()): Promise<string[]> {
  const script = join(bin, "jobs.bash");
  const { stdout } = await run(
    "bash",
    [
      "-c",
      `${prelude}source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); _jobs_complete; printf '%s\\n' "\${COMPREPLY[@]}"`,
      "bash",
      script,
      ...words,
    ],
    { encoding: "utf8", env: { PATH: `${bin}:${process.env.PATH}`, HOME: process.env.HOME, XDG_CONFIG_HOME: bin, ...env } },
  );
  return stdout.split("\n").filter(Boolean).sort();
}

beforeAll(async () => {
  t = await startTestStack();
  admin = await setUpAdmin(t);
  alice = await createUserWithKey(t, { cookie: admin.cookie }, "researcher", "alice");
  await http("POST", "/api/configs/environments", alice, { name: "faces", from_example: "demo" });
  await http("POST", "/api/configs/environments", admin, { name: "fabrics", from_example: "demo" });
  await http("POST", "/api/configs/environments", admin, { name: "landscapes", from_example: "demo" });
  aliceJobs = [];
  for (let i = 0; i < 2; i++) aliceJobs.push((await http("POST", "/api/queue/submit", alice, { config_name: "faces" })).job_id);
  // The program as a user has it on PATH (`npm link`): training-jobs, running this checkout's CLI.
  const program = join(bin, "training-jobs");
  writeFileSync(program, `#!/bin/sh\nexec "${process.execPath}" "${resolve("runner/cli/bin.mjs")}" "$@"\n`);
  chmodSync(program, 0o755);
  writeFileSync(join(bin, "jobs.bash"), (await jobs(["completion", "bash"])).stdout);
});

afterAll(async () => {
  await t?.stop();
});

describe("jobs __complete", () => {
  it("lists every environment's name, one a line", async () => {
    const run = await complete("environments", asAlice());
    expect([run.code, run.stderr]).toEqual([0, ""]);
    expect(run.stdout).toBe("fabrics\nfaces\nlandscapes\n");
  });

  it("lists the queue's job ids, anyone's", async () => {
    const adminJob = (await http("POST", "/api/queue/submit", admin, { config_name: "landscapes" })).job_id;
    const run = await complete("jobs", asAlice());
    expect([run.code, run.stderr]).toEqual([0, ""]);
    expect(run.stdout.split("\n").filter(Boolean).sort()).toEqual([...aliceJobs, adminJob].sort());
  });

  it("prints nothing and exits 0 when the service is unreachable, no key is configured, or the key is revoked", async () => {
    const closed = `http://127.0.0.1:${await freePort()}`;
    const revoked = await createUserWithKey(t, { cookie: admin.cookie }, "researcher", "revoked");
    const [key] = (await http("GET", "/api/cloud/auth/api-keys", revoked)).keys;
    const gone = await t.call("DELETE", `/api/cloud/auth/api-keys/${key.id}`, {
      auth: { cookie: revoked.cookie },
      headers: { origin: t.base },
    });
    expect(gone.status, gone.text).toBe(200);
    expect((await t.call("GET", "/api/users/me", { auth: { key: revoked.key } })).status).toBe(401);
    for (const env of [
      { SERVICE_URL: closed, SERVICE_API_KEY: alice.key },
      { SERVICE_URL: t.base },
      { SERVICE_URL: t.base, SERVICE_API_KEY: revoked.key },
      {},
    ]) {
      for (const kind of ["jobs", "environments"]) {
        const run = await complete(kind, env);
        expect([run.code, run.stdout, run.stderr]).toEqual([0, "", ""]);
      }
    }
  });

  it("is hidden: neither in --help nor among the commands the completion offers", async () => {
    expect((await jobs(["--help"])).stdout).not.toContain("__complete");
    expect(await bashOffers(["training-jobs", "_"])).toEqual([]);
  });
});

describe("bash completion from the service", () => {
  it("completes job ids for the commands that take one, and environment names for submit and env show/set/export", async () => {
    const ids = [...aliceJobs].sort();
    expect((await bashOffers(["training-jobs", "logs", "local-"])).filter((id) => ids.includes(id))).toEqual(ids);
    expect(await bashOffers(["training-jobs", "cancel", aliceJobs[0]!])).toEqual([aliceJobs[0]]);
    expect(await bashOffers(["training-jobs", "submit", "fa"])).toEqual(["fabrics", "faces"]);
    expect(await bashOffers(["training-jobs", "env", "show", "fa"])).toEqual(["fabrics", "faces"]);
    expect(await bashOffers(["training-jobs", "env", "set", "la"])).toEqual(["landscapes"]);
    // Not for arguments that are not ids or names.
    expect(await bashOffers(["training-jobs", "env", "import", "fa"])).toEqual([]);
    expect(await bashOffers(["training-jobs", "env", ""])).toEqual(["export", "import", "list", "set", "show"]);
  });

  it("through `alias jobs=training-jobs` it runs the alias, not the shell's jobs builtin", async () => {
    expect(await bashOffers(["jobs", "submit", "la"], `shopt -s expand_aliases; alias jobs=${join(bin, "training-jobs")}; `)).toEqual([
      "landscapes",
    ]);
  });

  it("offers nothing from the service when it cannot be reached, and prints no error into the line", async () => {
    expect(
      await bashOffers(["training-jobs", "submit", "fa"], "", {
        SERVICE_URL: `http://127.0.0.1:${await freePort()}`,
        SERVICE_API_KEY: "st_x",
      }),
    ).toEqual([]);
  });
});
