import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROUTE_ACCESS } from "../../shared/permissions";
import { createUserWithKey, setUpAdmin, startTestStack, type Credentials, type TestStack } from "../helpers/stack";

let t: TestStack;
let researcher: Credentials;
let viewer: Credentials;
let admin: Credentials;

beforeAll(async () => {
  t = await startTestStack();
  const created = await setUpAdmin(t);
  admin = { cookie: created.cookie };
  researcher = { key: (await createUserWithKey(t, { cookie: created.cookie }, "researcher")).key };
  viewer = { key: (await createUserWithKey(t, { cookie: created.cookie }, "viewer")).key };
});
afterAll(async () => {
  await t?.stop();
});

const ISO = expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

/** The starter dataloader, written out by hand: what a new environment named `name` must get. */
const starter = (name: string) => [
  {
    id: `${name}-images`,
    type: "local",
    dataset_type: "image",
    instance_data_dir: `datasets/${name}`,
    caption_strategy: "textfile",
    resolution: 1024,
    resolution_type: "pixel_area",
    cache_dir_vae: `cache/${name}/vae`,
    crop: false,
    metadata_backend: "discovery",
  },
  {
    id: `${name}-text-embeds`,
    type: "local",
    dataset_type: "text_embeds",
    default: true,
    cache_dir: `cache/${name}/text`,
    write_batch_size: 128,
  },
];

const create = (json: Record<string, unknown>, auth = researcher) => t.call("POST", "/api/configs/environments", { json, auth });
const put = (name: string, json: unknown, auth = researcher) => t.call("PUT", `/api/configs/${name}`, { json, auth });
const get = (name: string, auth = viewer) => t.call("GET", `/api/configs/${name}`, { auth });
const list = async (auth = viewer) =>
  (await t.call("GET", "/api/configs/", { auth })).body.environments as { name: string; active: boolean }[];

describe("creating environments", () => {
  it("creates one with its model options and the starter dataloader", async () => {
    const created = await create({
      name: "portraits",
      model_family: "flux",
      model_flavour: "dev",
      model_type: "lora",
      description: "Portrait LoRA",
    });
    expect(created.status).toBe(201);
    expect(created.body).toEqual({
      name: "portraits",
      description: "Portrait LoRA",
      tags: [],
      model_family: "flux",
      model_flavour: "dev",
      model_type: "lora",
      lora_type: null,
      config: { "--model_family": "flux", "--model_flavour": "dev", "--model_type": "lora" },
      dataloader: starter("portraits"),
      active: false,
      owner: "researcher-user",
      created_at: ISO,
      updated_at: created.body.created_at,
    });
    const read = await get("portraits");
    expect(read.status).toBe(200);
    expect(read.body).toEqual(created.body);
  });

  it("seeds only the model fields given", async () => {
    const bare = await create({ name: "bare" });
    expect(bare.status).toBe(201);
    expect(bare.body).toMatchObject({
      description: null,
      model_family: null,
      model_flavour: null,
      model_type: null,
      lora_type: null,
      config: {},
      dataloader: starter("bare"),
    });
    const lycoris = await create({ name: "sd3.lycoris_v1", model_family: "sd3", model_type: "lora", lora_type: "lycoris" });
    expect(lycoris.body.config).toEqual({ "--model_family": "sd3", "--model_type": "lora", "--lora_type": "lycoris" });
  });

  it("refuses a name that is taken with 409", async () => {
    const again = await create({ name: "portraits", model_family: "sdxl" });
    expect(again.status).toBe(409);
    expect(again.body).toEqual({ detail: 'An environment named "portraits" already exists; choose another name', code: "conflict" });
    expect((await get("portraits")).body.model_family).toBe("flux");
  });

  it("refuses names that are not a safe directory name, or reserved, with 422 and stores nothing", async () => {
    const FORMAT = "1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit";
    const RESERVED = '"examples" and "environments" are reserved; choose another name';
    const cases: [string, string[]][] = [
      ["a/b", [FORMAT]],
      ["a\\b", [FORMAT]],
      ["..", [FORMAT]],
      [".", [FORMAT]],
      [".hidden", [FORMAT]],
      ["-flag", [FORMAT]],
      ["has space", [FORMAT]],
      ["", [FORMAT]],
      ["x".repeat(65), [FORMAT]],
      ["examples", [RESERVED]],
      ["environments", [RESERVED]],
      ["Examples", [RESERVED]],
    ];
    for (const [name, messages] of cases) {
      const reply = await create({ name, model_family: "flux" });
      expect(reply.status, name).toBe(422);
      expect(reply.body.code).toBe("invalid_request");
      expect(reply.body.errors, name).toEqual(messages.map((message) => ({ path: "body.name", message })));
    }
    expect((await list()).map((e) => e.name)).toEqual(["bare", "portraits", "sd3.lycoris_v1"]);
    expect((await t.call("GET", "/api/configs/examples", { auth: viewer })).body.examples).toHaveLength(4);
  });

  it("starts from a shipped example with from_example; fields given win; an unknown example is 422", async () => {
    const examples = (await t.call("GET", "/api/configs/examples", { auth: viewer })).body.examples as any[];
    const demo = examples.find((e) => e.name === "demo");
    expect(demo.config).toMatchObject({ "--trainer": "demo", "--num_processes": 0 });
    const made = await create({ name: "my-demo", from_example: "demo", description: "mine" });
    expect(made.status).toBe(201);
    const got = (await get("my-demo")).body;
    expect(got).toMatchObject({
      name: "my-demo",
      description: "mine",
      tags: demo.tags,
      model_family: "demo",
      model_type: "full",
      config: demo.config,
    });
    expect(got.dataloader).toEqual(starter("my-demo"));
    const unknown = await create({ name: "nope-demo", from_example: "nope" });
    expect(unknown.status).toBe(422);
    expect(unknown.body).toMatchObject({
      code: "unknown_example",
      errors: [{ path: "body.from_example", message: "one of flux-dev-lora, sdxl-full, sd35-medium-lycoris, demo" }],
    });
    expect((await get("nope-demo")).status).toBe(404);
  });

  it("refuses unknown fields and a missing name", async () => {
    const unknown = await create({ name: "extra", model: "flux" });
    expect(unknown.status).toBe(422);
    expect(unknown.body.errors).toEqual([{ path: "body", message: "unknown field(s): model" }]);
    const nameless = await create({ model_family: "flux" });
    expect(nameless.status).toBe(422);
    expect(nameless.body.errors[0].path).toBe("body.name");
    expect((await get("extra")).status).toBe(404);
  });
});

describe("an unknown environment", () => {
  it.each([
    ["GET", "/api/configs/no-such-env", undefined],
    ["PUT", "/api/configs/no-such-env", { description: "x" }],
    ["POST", "/api/configs/no-such-env/activate", undefined],
    ["POST", "/api/configs/no-such-env/dataloader", undefined],
    ["GET", "/api/configs/no-such-env/export", undefined],
  ])("%s %s is 404", async (method, path, json) => {
    const reply = await t.call(method, path, { json, auth: researcher });
    expect(reply.status).toBe(404);
    expect(reply.body).toEqual({ detail: 'Environment "no-such-env" not found', code: "not_found" });
  });

  it("is 422, not 404, when the name in the path could never exist", async () => {
    const reply = await put("examples", { description: "x" });
    expect(reply.status).toBe(422);
    expect(reply.body.errors).toEqual([{ path: "param.name", message: '"examples" and "environments" are reserved; choose another name' }]);
  });
});

describe("updating", () => {
  it("replaces the option map, and the model fields follow it", async () => {
    const created = (await create({ name: "tuning", model_family: "flux", model_flavour: "dev", model_type: "lora" })).body;
    const config = {
      "--model_family": "sdxl",
      "--model_type": "full",
      "--learning_rate": 0.000001,
      "--train_batch_size": 4,
      "--validation_preview": false,
      "--resume_from_checkpoint": "latest",
      "--lora_dropout": null,
    };
    const updated = await put("tuning", { description: "SDXL now", tags: ["sdxl", "full"], config });
    expect(updated.status).toBe(200);
    expect(updated.body).toEqual({
      ...created,
      description: "SDXL now",
      tags: ["sdxl", "full"],
      model_family: "sdxl",
      model_flavour: null,
      model_type: "full",
      config,
      updated_at: ISO,
    });
    expect(updated.body.updated_at >= created.updated_at).toBe(true);

    const replaced = await put("tuning", { config: { "--seed": 42 } });
    expect(replaced.body.config).toEqual({ "--seed": 42 });
    expect(replaced.body).toMatchObject({ model_family: null, model_type: null, tags: ["sdxl", "full"], description: "SDXL now" });

    const described = await put("tuning", { description: null });
    expect(described.body).toMatchObject({ description: null, config: { "--seed": 42 }, tags: ["sdxl", "full"] });
    expect((await get("tuning")).body).toEqual(described.body);
  });

  it("refuses an option name without -- or a value that is not a scalar, and changes nothing", async () => {
    const before = (await get("tuning")).body;
    const badKey = await put("tuning", { config: { "--seed": 1, learning_rate: 0.1 } });
    expect(badKey.status).toBe(422);
    expect(badKey.body.errors).toEqual([
      { path: "body.config.learning_rate", message: 'option names start with "--", for example "--learning_rate"' },
    ]);
    expect(badKey.body.detail).toContain("body.config.learning_rate");

    const badValue = await put("tuning", { config: { "--webhook_config": [{ webhook_type: "raw" }] } });
    expect(badValue.status).toBe(422);
    expect(badValue.body.errors).toEqual([
      { path: "body.config.--webhook_config", message: "an option value is a string, number, boolean or null" },
    ]);

    const badTags = await put("tuning", { tags: "sdxl" });
    expect(badTags.status).toBe(422);
    expect(badTags.body.errors[0].path).toBe("body.tags");

    expect((await get("tuning")).body).toEqual(before);
  });

  it("renames: the old name is gone, the dataloader keeps its paths, a taken or reserved name is refused", async () => {
    const created = (await create({ name: "old-name", model_family: "flux" })).body;
    const renamed = await put("old-name", { name: "new-name" });
    expect(renamed.status).toBe(200);
    expect(renamed.body).toEqual({ ...created, name: "new-name", updated_at: ISO });
    expect(renamed.body.dataloader).toEqual(starter("old-name"));
    expect((await get("old-name")).status).toBe(404);
    expect((await get("new-name")).body).toEqual(renamed.body);

    const taken = await put("new-name", { name: "portraits" });
    expect(taken.status).toBe(409);
    expect(taken.body).toEqual({ detail: 'An environment named "portraits" already exists; choose another name', code: "conflict" });
    const reserved = await put("new-name", { name: "environments" });
    expect(reserved.status).toBe(422);
    expect(reserved.body.errors).toEqual([
      { path: "body.name", message: '"examples" and "environments" are reserved; choose another name' },
    ]);
    expect((await get("new-name")).body).toEqual(renamed.body);
    expect((await get("portraits")).body.model_family).toBe("flux");
  });
});

describe("activation", () => {
  it("keeps exactly one environment active per user, through a rename; other users' views are untouched", async () => {
    await create({ name: "alpha" });
    await create({ name: "beta" });
    expect((await list(researcher)).filter((e) => e.active)).toEqual([]);

    const first = await t.call("POST", "/api/configs/alpha/activate", { auth: researcher });
    expect(first.status).toBe(200);
    expect(first.body).toEqual({ success: true, active: "alpha" });
    expect((await get("alpha", researcher)).body.active).toBe(true);
    expect((await list(researcher)).filter((e) => e.active).map((e) => e.name)).toEqual(["alpha"]);

    expect((await t.call("POST", "/api/configs/beta/activate", { auth: researcher })).body).toEqual({ success: true, active: "beta" });
    expect((await get("alpha", researcher)).body.active).toBe(false);
    expect((await list(researcher)).filter((e) => e.active).map((e) => e.name)).toEqual(["beta"]);

    const renamed = await put("beta", { name: "beta-renamed" });
    expect(renamed.body.active).toBe(true);
    expect((await get("beta-renamed", researcher)).body.active).toBe(true);
    expect((await list(researcher)).filter((e) => e.active).map((e) => e.name)).toEqual(["beta-renamed"]);

    expect((await t.call("POST", "/api/configs/beta-renamed/activate", { auth: researcher })).body).toEqual({
      success: true,
      active: "beta-renamed",
    });
    expect((await list(researcher)).filter((e) => e.active).map((e) => e.name)).toEqual(["beta-renamed"]);
    // The active environment is the caller's own: the viewer has none.
    expect((await get("beta-renamed", viewer)).body.active).toBe(false);
    expect((await list(viewer)).filter((e) => e.active)).toEqual([]);
  });
});

describe("the dataloader", () => {
  it("is regenerated as the starter one for the current name", async () => {
    await create({ name: "regen" });
    await put("regen", { name: "regen-2" });
    expect((await get("regen-2")).body.dataloader).toEqual(starter("regen"));
    const before = (await get("regen-2")).body;

    const reply = await t.call("POST", "/api/configs/regen-2/dataloader", { auth: researcher });
    expect(reply.status).toBe(200);
    expect(reply.body).toEqual({ success: true, dataloader: starter("regen-2") });
    const after = (await get("regen-2")).body;
    expect(after).toEqual({ ...before, dataloader: starter("regen-2"), updated_at: ISO });
  });
});

describe("a dataloader of one's own", () => {
  it("replaces the whole dataloader, keeping SimpleTuner's other dataset options as given", async () => {
    expect((await create({ name: "own-data" })).status).toBe(201);
    const dataloader = [
      {
        id: "cats",
        type: "local",
        dataset_type: "image",
        instance_data_dir: "datasets/cats/2026",
        caption_strategy: "textfile",
        resolution: 64,
        resolution_type: "pixel",
        minimum_image_size: 0,
        repeats: 3,
        cache_dir_vae: "cache/cats/vae",
      },
      { id: "text", type: "local", dataset_type: "text_embeds", default: true, cache_dir: "cache/text" },
    ];
    const saved = await put("own-data", { dataloader });
    expect(saved.status, saved.text).toBe(200);
    expect(saved.body.dataloader).toEqual(dataloader);
    expect((await get("own-data")).body.dataloader).toEqual(dataloader);
    expect((await t.call("DELETE", "/api/configs/own-data", { auth: researcher })).status).toBe(200);
  });

  it("refuses paths out of the datasets and the job's directory, twice-used ids, and a box path from a researcher, changing nothing", async () => {
    expect((await create({ name: "guarded-data" })).status).toBe(201);
    const before = (await get("guarded-data")).body;
    const image = (over: Record<string, unknown>) => ({
      id: "x",
      type: "local",
      dataset_type: "image",
      instance_data_dir: "datasets/x",
      ...over,
    });
    const cases: [unknown[], string][] = [
      [[image({ instance_data_dir: "/etc" })], "body.dataloader.0.instance_data_dir"],
      [[image({ instance_data_dir: "datasets/../../service" })], "body.dataloader.0.instance_data_dir"],
      [[image({ instance_data_dir: "other/place" })], "body.dataloader.0.instance_data_dir"],
      [[image({ cache_dir_vae: "/var/lib/training-runner/cache" })], "body.dataloader.0.cache_dir_vae"],
      [[image({ cache_dir_vae: "../../elsewhere" })], "body.dataloader.0.cache_dir_vae"],
      [[image({}), image({})], "body.dataloader.1.id"],
    ];
    for (const [dataloader, path] of cases) {
      const refused = await put("guarded-data", { dataloader });
      expect(refused.status, JSON.stringify(dataloader)).toBe(422);
      expect(refused.body.code).toBe("invalid_dataloader");
      expect(refused.body.errors.map((f: { path: string }) => f.path)).toEqual([path]);
    }
    // Not a list, or too many: the schema's 422.
    expect((await put("guarded-data", { dataloader: { id: "x" } })).status).toBe(422);
    expect((await put("guarded-data", { dataloader: Array.from({ length: 65 }, (_, i) => image({ id: `d${i}` })) })).status).toBe(422);
    // Another user's environment: 403, whatever the dataloader.
    const other = await createUserWithKey(t, admin, "researcher", "mallory");
    expect((await put("guarded-data", { dataloader: [image({})] }, { key: other.key })).status).toBe(403);
    expect((await get("guarded-data")).body).toEqual(before);
    expect((await t.call("DELETE", "/api/configs/guarded-data", { auth: researcher })).status).toBe(200);
  });
});

describe("export", () => {
  it("downloads the environment as <name>.json without its active flag or timestamps", async () => {
    await create({ name: "shipping", model_family: "flux", model_flavour: "schnell", model_type: "lora", description: "To share" });
    const config = {
      "--model_family": "flux",
      "--model_flavour": "schnell",
      "--model_type": "lora",
      "--lora_rank": 16,
      "--validation_preview": true,
    };
    await put("shipping", { tags: ["flux"], config });
    await t.call("POST", "/api/configs/shipping/activate", { auth: researcher });

    const before = Date.now();
    const reply = await t.call("GET", "/api/configs/shipping/export", { auth: viewer });
    expect(reply.status).toBe(200);
    expect(reply.headers.get("content-disposition")).toBe('attachment; filename="shipping.json"');
    expect(reply.headers.get("content-type")).toContain("application/json");
    expect(reply.body).toEqual({
      name: "shipping",
      description: "To share",
      tags: ["flux"],
      model_family: "flux",
      model_flavour: "schnell",
      model_type: "lora",
      lora_type: null,
      config,
      dataloader: starter("shipping"),
      exported_at: ISO,
    });
    expect(Math.abs(Date.parse(reply.body.exported_at) - before)).toBeLessThan(60_000);
  });
});

describe("examples", () => {
  it("lists the shipped templates, each consistent with its own options", async () => {
    const reply = await t.call("GET", "/api/configs/examples", { auth: viewer });
    expect(reply.status).toBe(200);
    const examples = reply.body.examples as any[];
    expect(examples.map((e) => e.name)).toEqual(["flux-dev-lora", "sdxl-full", "sd35-medium-lycoris", "demo"]);
    expect(examples.map((e) => [e.model_family, e.model_flavour, e.model_type, e.lora_type])).toEqual([
      ["flux", "dev", "lora", "standard"],
      ["sdxl", null, "full", null],
      ["sd3", "medium", "lora", "lycoris"],
      ["demo", null, "full", null],
    ]);
    for (const example of examples) {
      expect(Object.keys(example).sort()).toEqual([
        "config",
        "dataloader",
        "description",
        "lora_type",
        "model_family",
        "model_flavour",
        "model_type",
        "name",
        "tags",
      ]);
      expect(Object.keys(example.config).filter((key) => !key.startsWith("--"))).toEqual([]);
      expect(example.config["--model_family"]).toBe(example.model_family);
      expect(example.config["--model_type"]).toBe(example.model_type);
      // The demo trainer needs no base model; the others name theirs.
      if (example.config["--trainer"] !== "demo") expect(example.config["--pretrained_model_name_or_path"]).toEqual(expect.any(String));
      // Of --num_train_epochs and --max_train_steps, the one not used is 0.
      expect([example.config["--num_train_epochs"], example.config["--max_train_steps"]].filter((v) => v === 0)).toHaveLength(1);
      expect(example.dataloader).toEqual(starter(example.name));
    }
  });
});

describe("listing and permissions", () => {
  it("lists summaries by name, with or without the trailing slash; config_type may only be model", async () => {
    const reply = await t.call("GET", "/api/configs/", { auth: viewer });
    expect(reply.status).toBe(200);
    expect(reply.body.environments.map((e: { name: string }) => e.name)).toEqual([
      "alpha",
      "bare",
      "beta-renamed",
      "my-demo",
      "new-name",
      "portraits",
      "regen-2",
      "sd3.lycoris_v1",
      "shipping",
      "tuning",
    ]);
    const portraits = (await get("portraits")).body;
    expect(reply.body.environments[5]).toEqual({
      name: "portraits",
      description: "Portrait LoRA",
      tags: [],
      model_family: "flux",
      model_type: "lora",
      active: false,
      owner: "researcher-user",
      created_at: portraits.created_at,
      updated_at: portraits.updated_at,
      last_run: null,
    });
    expect((await t.call("GET", "/api/configs/?config_type=model", { auth: viewer })).body).toEqual(reply.body);
    expect((await t.call("GET", "/api/configs", { auth: viewer })).body).toEqual(reply.body);
    // Each caller sees their own active environment: the researcher activated shipping, the viewer nothing.
    expect(reply.body.environments.filter((e: { active: boolean }) => e.active)).toEqual([]);
    expect((await list(researcher)).filter((e) => e.active).map((e) => e.name)).toEqual(["shipping"]);

    const wrongType = await t.call("GET", "/api/configs/?config_type=lora", { auth: viewer });
    expect(wrongType.status).toBe(422);
    expect(wrongType.body.errors).toEqual([{ path: "query.config_type", message: expect.stringContaining('"model"') }]);
  });

  it("gives /api/configs/examples the same access as /api/configs/{name}, whose pattern it also matches", () => {
    // The authorisation middleware looks up the last route matching a path, which for
    // /api/configs/examples is /api/configs/{name}: the two rules must not differ.
    expect(ROUTE_ACCESS["GET /api/configs/examples"]).toEqual(ROUTE_ACCESS["GET /api/configs/{name}"]);
  });

  it("lets a viewer read but not create, change or activate", async () => {
    expect((await get("portraits", viewer)).status).toBe(200);
    const forbidden = { detail: "This needs the researcher level or higher; you are viewer", code: "forbidden" };
    const attempts = [
      await create({ name: "by-viewer" }, viewer),
      await put("portraits", { description: "by viewer" }, viewer),
      await t.call("POST", "/api/configs/portraits/activate", { auth: viewer }),
      await t.call("POST", "/api/configs/portraits/dataloader", { auth: viewer }),
    ];
    for (const reply of attempts) {
      expect(reply.status).toBe(403);
      expect(reply.body).toEqual(forbidden);
    }
    expect((await get("by-viewer")).status).toBe(404);
    expect((await get("portraits")).body).toMatchObject({ description: "Portrait LoRA", active: false });
    expect((await t.call("GET", "/api/configs/")).status).toBe(401);
  });
});
