// `jobs env set`, `jobs env export` and `jobs env import`: the built binary run as a subprocess
// against the real local stack, each change read back over HTTP; another researcher's change is
// refused by the API with the environment unchanged; bad arguments exit 2 before any request.
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jobs } from "../helpers/cli";
import { createUserWithKey, setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";

let t: TestStack;
let alice: { key: string; id: number };
let bob: { key: string; id: number };
const dir = mkdtempSync(join(tmpdir(), "cli-env-edit-"));

const as = (who: { key: string }, args: string[]) => jobs(args, { env: { SERVICE_URL: t.base, SERVICE_API_KEY: who.key } });
const http = async (method: string, path: string, who: { key: string }, json?: unknown) => {
  const reply = await t.call(method, path, { auth: { key: who.key }, ...(json === undefined ? {} : { json }) });
  if (reply.status >= 300) throw new Error(`${method} ${path}: ${reply.status} ${reply.text}`);
  return reply.body;
};
/** The environment as stored: secrets unmasked (its owner may read them). */
const stored = (name: string) => http("GET", `/api/configs/${name}?unmasked=true`, alice);

const FACES = {
  "--model_family": "flux",
  "--model_type": "lora",
  "--learning_rate": 0.0001,
  "--lora_rank": 16,
  "--hub_token": "hf_secretsecretsecret0123456789",
  "--push_to_hub": false,
};

beforeAll(async () => {
  t = await startTestStack();
  const admin = await setUpAdmin(t);
  alice = await createUserWithKey(t, { cookie: admin.cookie }, "researcher", "alice");
  bob = await createUserWithKey(t, { cookie: admin.cookie }, "researcher", "bob");
  await http("POST", "/api/configs/environments", alice, { name: "faces", model_family: "flux", model_type: "lora" });
  await http("PUT", "/api/configs/faces", alice, { tags: ["portraits"], config: FACES });
});

afterAll(async () => {
  await t?.stop();
});

describe("jobs env set", () => {
  it("sets and removes the options given, keeps the others and the masked secret's stored value", async () => {
    const run = await as(alice, [
      "env",
      "set",
      "faces",
      "--learning_rate",
      "0.0002",
      "--lora_rank=32",
      "--validation_prompt",
      "a photo of ada",
      "--resolution",
      '"1024"',
      "--use_ema",
      "--unset",
      "--push_to_hub",
    ]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toBe(
      "Saved faces: set --learning_rate, --lora_rank, --validation_prompt, --resolution, --use_ema; removed --push_to_hub\n",
    );
    expect((await stored("faces")).config).toEqual({
      "--model_family": "flux",
      "--model_type": "lora",
      "--learning_rate": 0.0002,
      "--lora_rank": 32,
      "--hub_token": "hf_secretsecretsecret0123456789",
      "--validation_prompt": "a photo of ada",
      "--resolution": "1024",
      "--use_ema": true,
    });
    expect((await stored("faces")).tags).toEqual(["portraits"]);
  });

  it("--format json prints the API's answer to the PUT (secrets masked)", async () => {
    const run = await as(alice, ["env", "set", "faces", "--lora_rank", "16", "--format", "json"]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.json()).toEqual(await http("GET", "/api/configs/faces", alice));
    expect(run.json().config["--hub_token"]).toBe("********");
  });

  it("another researcher's set is the API's 403 (exit 1) and the environment is unchanged", async () => {
    const before = await stored("faces");
    const run = await as(bob, ["env", "set", "faces", "--learning_rate", "1", "--unset", "--hub_token"]);
    expect([run.code, run.stdout]).toEqual([1, ""]);
    expect(run.stderr).toMatch(/^error: .*(owner|lead|admin)/i);
    expect(await stored("faces")).toEqual(before);
  });

  it("bad arguments exit 2 with nothing sent: no option, a word where an option goes, a bad name, set and unset at once", async () => {
    const before = await stored("faces");
    // Bob's key would be refused by the API: exit 2, not 1, shows nothing reached it.
    for (const [args, message] of [
      [[], "error: nothing to change: give options to set (--key value) or to remove (--unset --key)\n"],
      [["0.1"], 'error: expected an option such as --learning_rate, not "0.1"\n'],
      [
        ["--learning rate", "1"],
        'error: "--learning rate" is not an option name: options look like --learning_rate (letters, digits, _ and -)\n',
      ],
      [["--lora_rank", "8", "--unset", "--lora_rank"], "error: --lora_rank is both set and unset\n"],
      [["--unset"], "error: --unset needs the option to remove: --unset --hub_token\n"],
    ] as const) {
      const run = await as(bob, ["env", "set", "faces", ...args]);
      expect([run.code, run.stdout, run.stderr]).toEqual([2, "", message]);
    }
    expect(await stored("faces")).toEqual(before);
  });
});

describe("jobs env export and import", () => {
  it("export writes the API's export to a file (-o) or stdout, secrets masked unless --unmasked", async () => {
    const file = join(dir, "faces.json");
    const run = await as(alice, ["env", "export", "faces", "-o", file]);
    expect([run.code, run.stdout, run.stderr]).toEqual([0, "", `Wrote faces to ${file}\n`]);
    const exported = await http("GET", "/api/configs/faces/export", alice);
    const written = JSON.parse(readFileSync(file, "utf8"));
    expect({ ...written, exported_at: null }).toEqual({ ...exported, exported_at: null });
    expect(written.config["--hub_token"]).toBe("********");

    const unmasked = await as(alice, ["env", "export", "faces", "--unmasked"]);
    expect(unmasked.code, unmasked.stderr).toBe(0);
    expect(unmasked.json().config["--hub_token"]).toBe("hf_secretsecretsecret0123456789");
    // Only its owner, a lead or an admin reads it unmasked.
    const refused = await as(bob, ["env", "export", "faces", "--unmasked"]);
    expect([refused.code, refused.stdout]).toEqual([1, ""]);
  });

  it("import creates the environment the file describes, under --name; the new owner is the importer", async () => {
    const file = join(dir, "faces-unmasked.json");
    writeFileSync(file, (await as(alice, ["env", "export", "faces", "--unmasked"])).stdout);
    const run = await as(bob, ["env", "import", file, "--name", "faces-bob"]);
    expect([run.code, run.stdout, run.stderr]).toEqual([0, `Created faces-bob from ${file}\n`, ""]);
    const copy = await http("GET", "/api/configs/faces-bob?unmasked=true", bob);
    const original = await stored("faces");
    expect(copy).toMatchObject({ owner: "bob", tags: original.tags, config: original.config, dataloader: original.dataloader });
  });

  it("a taken name is refused without --replace (exit 1, unchanged); --replace puts the file's options", async () => {
    const file = join(dir, "edited.json");
    const exported = (await as(alice, ["env", "export", "faces"])).json();
    writeFileSync(file, JSON.stringify({ ...exported, tags: ["edited"], config: { ...exported.config, "--lora_rank": 64 } }));
    const before = await stored("faces");
    const refused = await as(alice, ["env", "import", file]);
    expect([refused.code, refused.stdout]).toEqual([1, ""]);
    expect(refused.stderr).toMatch(/^error: .*add --replace to replace environment faces\n$/);
    expect(await stored("faces")).toEqual(before);

    const run = await as(alice, ["env", "import", file, "--replace"]);
    expect([run.code, run.stdout, run.stderr]).toEqual([0, `Replaced faces from ${file}\n`, ""]);
    const after = await stored("faces");
    // The masked secret in the file kept its stored value.
    expect(after.config).toEqual({ ...before.config, "--lora_rank": 64 });
    expect(after.tags).toEqual(["edited"]);
  });

  it("another researcher's import --replace is the API's 403 and the environment is unchanged", async () => {
    const file = join(dir, "takeover.json");
    writeFileSync(file, JSON.stringify({ name: "faces", tags: ["mine"], config: { "--learning_rate": 1 } }));
    const before = await stored("faces");
    const run = await as(bob, ["env", "import", file, "--replace"]);
    expect([run.code, run.stdout]).toEqual([1, ""]);
    expect(run.stderr).toMatch(/^error: .*(owner|lead|admin)/i);
    expect(await stored("faces")).toEqual(before);
  });

  it("a new environment whose file holds masked secrets is refused by the API and nothing is left behind", async () => {
    const file = join(dir, "masked.json");
    writeFileSync(file, (await as(alice, ["env", "export", "faces"])).stdout);
    const run = await as(bob, ["env", "import", file, "--name", "faces-masked"]);
    expect([run.code, run.stdout]).toEqual([1, ""]);
    expect(run.stderr).toMatch(/^error: .*--hub_token is the mask "\*{8}" but nothing is stored there to keep/);
    expect((await t.call("GET", "/api/configs/faces-masked", { auth: { key: bob.key } })).status).toBe(404);
  });

  it("a file that is not an environment, or no name, exits 2 before any request", async () => {
    const notJson = join(dir, "not.json");
    writeFileSync(notJson, "{ name: faces");
    const wrong = join(dir, "wrong.json");
    writeFileSync(wrong, JSON.stringify({ name: "x", config: { learning_rate: 1 } }));
    const nameless = join(dir, "nameless.json");
    writeFileSync(nameless, JSON.stringify({ config: {} }));
    const list = await http("GET", "/api/configs", alice);
    for (const [file, message] of [
      [notJson, new RegExp(`^error: ${notJson} is not JSON: `)],
      [wrong, new RegExp(`^error: ${wrong} is not an exported environment: config\\.learning_rate: `)],
      [nameless, new RegExp(`^error: ${nameless} names no environment: add --name\\n$`)],
      [join(dir, "missing.json"), /^error: cannot read .*missing\.json: ENOENT\n$/],
    ] as const) {
      const run = await as(alice, ["env", "import", file]);
      expect([run.code, run.stdout]).toEqual([2, ""]);
      expect(run.stderr).toMatch(message);
    }
    expect(await http("GET", "/api/configs", alice)).toEqual(list);
  });
});
