// `jobs env list` and `jobs env show`: the built binary run as a subprocess against the real local
// stack, each answer compared with what the API returns over HTTP.
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jobs, tempConfigHome, type JobsRun } from "../helpers/cli";
import { createUserWithKey, setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";

let t: TestStack;
let alice: { key: string; id: number };
let bob: { key: string; id: number };

const as = (who: { key: string }, args: string[]) => jobs(args, { env: { SERVICE_URL: t.base, SERVICE_API_KEY: who.key } });
const http = async (method: string, path: string, who: { key: string }, json?: unknown) => {
  const reply = await t.call(method, path, { auth: { key: who.key }, ...(json === undefined ? {} : { json }) });
  if (reply.status >= 300) throw new Error(`${method} ${path}: ${reply.status} ${reply.text}`);
  return reply.body;
};
const lines = (run: JobsRun) => run.stdout.split("\n").filter((line) => line !== "");
const cells = (line: string) => line.split(/ {2,}/);

beforeAll(async () => {
  t = await startTestStack();
  const admin = await setUpAdmin(t);
  alice = await createUserWithKey(t, { cookie: admin.cookie }, "researcher", "alice");
  bob = await createUserWithKey(t, { cookie: admin.cookie }, "researcher", "bob");
  await http("POST", "/api/configs/environments", alice, { name: "faces", model_family: "flux", model_type: "lora" });
  await http("PUT", "/api/configs/faces", alice, {
    tags: ["flux", "portraits"],
    config: {
      "--model_family": "flux",
      "--model_type": "lora",
      "--learning_rate": 0.0001,
      "--lora_rank": "16",
      "--validation_prompt": "a photo of\u001b[31m ada",
      "--hub_token": "hf_secretsecretsecret0123456789",
      "--push_to_hub": false,
    },
  });
});

afterAll(async () => {
  await t?.stop();
});

describe("jobs env list", () => {
  it("lists each environment with its owner, model and tags; --format json prints the API's answer", async () => {
    const text = await as(bob, ["env", "list"]);
    expect(text.code, text.stderr).toBe(0);
    expect(cells(lines(text)[0]!)).toEqual(["NAME", "OWNER", "MODEL", "TYPE", "TAGS", "LAST RUN", "UPDATED"]);
    const faces = lines(text).find((line) => line.startsWith("faces "));
    expect(cells(faces!).slice(0, 6)).toEqual(["faces", "alice", "flux", "lora", "flux,portraits", "-"]);

    const json = await as(bob, ["env", "list", "--format", "json"]);
    expect(json.code, json.stderr).toBe(0);
    expect(json.json()).toEqual(await http("GET", "/api/configs", bob));
  });
});

describe("an environment's last run", () => {
  it("is the newest job submitted with its name, in the API's list and in `env list`; another environment's jobs do not count", async () => {
    await http("POST", "/api/configs/environments", alice, { name: "demo-runs", from_example: "demo" });
    const first = await http("POST", "/api/queue/submit", alice, { config_name: "demo-runs" });
    const second = await http("POST", "/api/queue/submit", bob, { config_name: "demo-runs" });
    expect(second.job_id).not.toBe(first.job_id);
    const listed = (await http("GET", "/api/configs", bob)).environments as { name: string; last_run: { job_id: string } | null }[];
    expect(listed.find((e) => e.name === "demo-runs")!.last_run!.job_id).toBe(second.job_id);
    expect(listed.find((e) => e.name === "faces")!.last_run).toBeNull();

    const text = await as(alice, ["env", "list"]);
    expect(text.code, text.stderr).toBe(0);
    const row = lines(text).find((line) => line.startsWith("demo-runs "));
    expect(cells(row!)[5]).toMatch(new RegExp(`^${second.job_id} [a-z_]+$`));
  });
});

describe("jobs env show", () => {
  it("prints the owner, the dataloader's size and each option as `--key value`, secrets masked as the API masks them", async () => {
    const run = await as(alice, ["env", "show", "faces"]);
    expect(run.code, run.stderr).toBe(0);
    const printed = lines(run);
    expect(printed).toContain("owner:       alice");
    const { dataloader } = await http("GET", "/api/configs/faces", alice);
    expect(dataloader.length).toBeGreaterThan(0);
    expect(printed).toContain(`dataloader:  ${dataloader.length} dataset${dataloader.length === 1 ? "" : "s"}`);
    // Numbers, booleans and strings that read as JSON print as JSON; plain strings as they are;
    // a string with a control character as JSON (no raw escape reaches the terminal).
    expect(printed.filter((line) => line.startsWith("--"))).toEqual([
      "--model_family flux",
      "--model_type lora",
      "--learning_rate 0.0001",
      '--lora_rank "16"',
      '--validation_prompt "a photo of\\u001b[31m ada"',
      "--hub_token ********",
      "--push_to_hub false",
    ]);
    expect(run.stdout).not.toContain("\u001b");
    expect(run.stdout).not.toContain("hf_secret");
  });

  it("--format json prints the API's answer, secrets masked", async () => {
    const run = await as(bob, ["env", "show", "faces", "--format", "json"]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.json()).toEqual(await http("GET", "/api/configs/faces", bob));
    expect(run.json().config["--hub_token"]).toBe("********");
  });

  it("an unknown environment is the API's 404 on stderr, exit 1", async () => {
    const run = await as(alice, ["env", "show", "nowhere"]);
    expect(run.code).toBe(1);
    expect(run.stdout).toBe("");
    expect(run.stderr).toMatch(/^error: .*nowhere/);
  });
});

describe("jobs env completion", () => {
  it("bash completes `env` and then its subcommands", async () => {
    const script = join(tempConfigHome(), "jobs.bash");
    writeFileSync(script, (await jobs(["completion", "bash"])).stdout);
    const complete = (words: string[]) =>
      execFileSync(
        "bash",
        [
          "-c",
          `source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); _jobs_complete; printf '%s\\n' "\${COMPREPLY[@]}"`,
          "bash",
          script,
          ...words,
        ],
        { encoding: "utf8" },
      )
        .split("\n")
        .filter(Boolean);
    expect(complete(["jobs", "en"])).toEqual(["env"]);
    expect(complete(["jobs", "env", ""])).toEqual(["list", "show", "set", "export", "import"]);
  });
});
