import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_ONLY_OPTIONS } from "../../shared/admin-options";
import { OptionCatalogue } from "../../shared/schemas/option-catalogue";
import { EXAMPLE_ENVIRONMENTS } from "../../edge/environments/examples";
import { MAX_RUNTIME_MINUTES } from "../../edge/jobs/runtime";
import { OPTION_CATALOGUE } from "../../edge/training/option-catalogue";
import { CHECKED_TYPES, INLINE_REQUIRED, MINIMUM, savedOptionProblems, TRAINING_DEFAULTS } from "../../edge/training/options";
import { createUserWithKey, setUpAdmin, startTestStack, type Credentials, type TestStack } from "../helpers/stack";

const entry = (name: string) => OPTION_CATALOGUE.find((o) => o.name === name);

describe("the option catalogue (pure)", () => {
  it("has every option the training form's rules type-check, with the same type and minimum", () => {
    expect(Object.keys(CHECKED_TYPES).length).toBeGreaterThan(10);
    for (const [name, type] of Object.entries(CHECKED_TYPES)) {
      expect(entry(name)?.type, name).toBe(type);
      if (MINIMUM[name] !== undefined) expect(entry(name)?.minimum, name).toBe(MINIMUM[name]);
    }
  });

  it("marks the form's required options, holds the service's defaults and the admin-only options", () => {
    for (const name of INLINE_REQUIRED) expect(entry(name)?.required, name).toBe(true);
    expect(OPTION_CATALOGUE.filter((o) => o.required).map((o) => o.name)).toEqual(expect.arrayContaining([...INLINE_REQUIRED]));
    expect(OPTION_CATALOGUE.filter((o) => o.required)).toHaveLength(INLINE_REQUIRED.length);
    for (const [name, value] of Object.entries(TRAINING_DEFAULTS)) expect(entry(name)?.default, name).toBe(value);
    expect(OPTION_CATALOGUE.filter((o) => o.admin_only).map((o) => o.name)).toEqual([...ADMIN_ONLY_OPTIONS]);
    expect(entry("--hub_token")?.secret).toBe(true);
    expect(entry("--learning_rate")?.secret).toBe(false);
    expect(entry("--max_runtime_minutes")?.maximum).toBe(MAX_RUNTIME_MINUTES);
  });

  it("names each option once, a choice with its allowed values and its default among them", () => {
    const names = OPTION_CATALOGUE.map((o) => o.name);
    expect(new Set(names).size).toBe(names.length);
    for (const option of OPTION_CATALOGUE) {
      expect(option.name).toMatch(/^--[a-z0-9_]+$/);
      expect(option.help.length, option.name).toBeGreaterThan(10);
      if (option.type === "choice") {
        expect(option.allowed?.length, option.name).toBeGreaterThan(1);
        if (option.default !== null) expect(option.allowed, option.name).toContain(option.default);
      } else expect(option.allowed, option.name).toBeUndefined();
    }
  });

  it("lets every shipped example's options pass the save rules, and refuses values as the form would", () => {
    for (const example of EXAMPLE_ENVIRONMENTS) expect(savedOptionProblems(example.config), example.name).toEqual([]);
    const byField = (problems: { field: string }[]) => [...problems].sort((a, b) => a.field.localeCompare(b.field));
    const refused = savedOptionProblems({ "--learning_rate": "fast", "--lora_rank": 0, "--validation_preview": "maybe", "--my_own": -0.5 });
    expect(byField(refused)).toEqual([
      { field: "--learning_rate", message: 'must be a number, not "fast"' },
      { field: "--lora_rank", message: "must be at least 1" },
      { field: "--my_own", message: "must not be negative" },
      { field: "--validation_preview", message: 'must be true or false, not "maybe"' },
    ]);
    expect(
      savedOptionProblems({ "--learning_rate": "0.0002", "--seed": 7, "--dataloader_prefetch": "true", "--custom": "anything" }),
    ).toEqual([]);
    const discord = (entry: object) => savedOptionProblems({ "--webhook_config": JSON.stringify([entry]) });
    expect(discord({ webhook_type: "discord", webhook_url: "https://discord.com/api/webhooks/1/x" })).toEqual([]);
    expect(discord({ webhook_type: "discord", callback_url: "https://a.example/h" })).toEqual([
      { field: "--webhook_config", message: "entry 0: webhook_url must be an http(s) URL" },
    ]);
    expect(savedOptionProblems({ "--seed": 1.5, "--train_batch_size": true })).toEqual([
      { field: "--seed", message: "must be a whole number, not 1.5" },
      { field: "--train_batch_size", message: "must be a whole number, not true" },
    ]);
  });
});

describe("GET /api/training/options and saving an environment (over HTTP)", () => {
  let t: TestStack;
  let researcher: Credentials;
  let other: Credentials;
  let viewer: Credentials;

  beforeAll(async () => {
    t = await startTestStack();
    const admin = await setUpAdmin(t);
    researcher = { key: (await createUserWithKey(t, { cookie: admin.cookie }, "researcher")).key };
    other = { key: (await createUserWithKey(t, { cookie: admin.cookie }, "researcher", "mallory")).key };
    viewer = { key: (await createUserWithKey(t, { cookie: admin.cookie }, "viewer")).key };
  });
  afterAll(async () => {
    await t?.stop();
  });

  it("serves the catalogue to any level, as the module holds it", async () => {
    const reply = await t.call("GET", "/api/training/options", { auth: viewer });
    expect(reply.status).toBe(200);
    expect(OptionCatalogue.parse(reply.body)).toEqual({ options: JSON.parse(JSON.stringify(OPTION_CATALOGUE)) });
    expect(reply.body.options.find((o: { name: string }) => o.name === "--lr_scheduler")).toMatchObject({
      type: "choice",
      default: "constant",
      allowed: expect.arrayContaining(["constant", "cosine"]),
    });
    expect((await t.call("GET", "/api/training/options")).status).toBe(401);
  });

  it("refuses a save whose option values the form's rules refuse, naming each field, and saves nothing", async () => {
    expect((await t.call("POST", "/api/configs/environments", { json: { name: "lr-check" }, auth: researcher })).status).toBe(201);
    const good = { "--model_family": "flux", "--learning_rate": 0.0001, "--my_flag": "kept" };
    expect((await t.call("PUT", "/api/configs/lr-check", { json: { config: good }, auth: researcher })).status).toBe(200);
    const refused = await t.call("PUT", "/api/configs/lr-check", {
      json: {
        description: "changed",
        config: { ...good, "--learning_rate": 3, "--train_batch_size": "two", "--max_train_steps": 10, "--num_train_epochs": 2 },
      },
      auth: researcher,
    });
    expect(refused.status).toBe(422);
    expect(refused.body.code).toBe("invalid_option");
    expect(refused.body.errors).toEqual([
      { path: "body.config.--train_batch_size", message: 'must be a whole number, not "two"' },
      { path: "body.config.--num_train_epochs", message: "set either --num_train_epochs or --max_train_steps; the other must be 0" },
      { path: "body.config.--max_train_steps", message: "set either --max_train_steps or --num_train_epochs; the other must be 0" },
      { path: "body.config.--learning_rate", message: "must be between 0 and 1 (for example 0.0001)" },
    ]);
    const stored = await t.call("GET", "/api/configs/lr-check", { auth: researcher });
    expect(stored.body.config).toEqual(good);
    expect(stored.body.description).toBeNull();
  });

  it("keeps unknown options: they are the trainer's to read", async () => {
    const saved = await t.call("PUT", "/api/configs/lr-check", {
      json: { config: { "--model_family": "flux", "--conditioning_multidataset_sampling": "combined", "--flow_schedule_shift": 3.5 } },
      auth: researcher,
    });
    expect(saved.status).toBe(200);
    expect(saved.body.config["--conditioning_multidataset_sampling"]).toBe("combined");
  });

  it("refuses a dataloader whose conditioning pair names nothing or a dataset that is not a conditioning one, saving nothing", async () => {
    const before = (await t.call("GET", "/api/configs/lr-check", { auth: researcher })).body.dataloader;
    const image = { id: "edits", type: "local", dataset_type: "image", instance_data_dir: "datasets/edits" };
    const reference = { id: "refs", type: "local", dataset_type: "conditioning", instance_data_dir: "datasets/refs" };
    const refused = await t.call("PUT", "/api/configs/lr-check", {
      json: { dataloader: [{ ...image, conditioning_data: ["nothing", "edits"] }, reference] },
      auth: researcher,
    });
    expect(refused.status).toBe(422);
    expect(refused.body.code).toBe("invalid_dataloader");
    expect(refused.body.errors).toEqual([
      { path: "body.dataloader.0.conditioning_data", message: 'no dataset has the id "nothing"' },
      { path: "body.dataloader.0.conditioning_data", message: '"edits" is not a conditioning dataset (its dataset_type is image)' },
      { path: "body.dataloader.1.dataset_type", message: "a conditioning dataset no image dataset names in its conditioning_data" },
    ]);
    expect((await t.call("GET", "/api/configs/lr-check", { auth: researcher })).body.dataloader).toEqual(before);
    const paired = [{ ...image, conditioning_data: ["refs"], conditioning_type: "reference_strict" }, reference];
    const saved = await t.call("PUT", "/api/configs/lr-check", { json: { dataloader: paired }, auth: researcher });
    expect(saved.status, saved.text).toBe(200);
    expect(saved.body.dataloader).toEqual(paired);
  });

  it("refuses another researcher's forced save with 403 and leaves the environment as it was", async () => {
    const before = (await t.call("GET", "/api/configs/lr-check", { auth: researcher })).body;
    const forced = await t.call("PUT", "/api/configs/lr-check", {
      json: { description: "<img src=x onerror=alert(1)>", config: { "--learning_rate": 0.5 } },
      auth: other,
    });
    expect(forced.status).toBe(403);
    expect(forced.body.code).toBe("not_owner");
    const after = (await t.call("GET", "/api/configs/lr-check", { auth: researcher })).body;
    expect(after).toEqual(before);
  });
});
