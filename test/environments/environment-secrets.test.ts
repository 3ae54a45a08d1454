// Who reads an environment's secrets, over real HTTP (issue 26): every secret shape is masked for
// everyone by default; its owner, leads and admins read it as stored when they ask; anyone else
// asking is refused, and what was shown, sent back, keeps the stored secrets.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MASK } from "../../shared/secrets-mask";
import { createUserWithKey, setUpAdmin, startTestStack, type Credentials, type Reply, type TestStack } from "../helpers/stack";

let t: TestStack;
let admin: Credentials;
let alice: Credentials;
let bob: Credentials;
let lead: Credentials;
let viewer: Credentials;

const WANDB_KEY = "wandb-d0NotLeakTheWandbKey";
const PRIVATE_KEY = "-----BEGIN PRIVATE KEY-----d0NotLeakThePrivateKey";
const CREDENTIALS = '{"type":"service_account","private_key_id":"d0NotLeakTheCredentials"}';
const DISCORD_TOKEN = "d0NotLeakTheDiscordToken";
const URL_PASSWORD = "d0NotLeakTheUrlPassword";
const AWS_SECRET = "d0NotLeakTheAwsSecret";
const SECRETS = [WANDB_KEY, PRIVATE_KEY, "d0NotLeakTheCredentials", DISCORD_TOKEN, URL_PASSWORD, AWS_SECRET];

const CONFIG = {
  "--model_family": "flux",
  "--model_type": "lora",
  "--lora_rank": 16,
  "--max_train_steps": 10,
  "--tokenizer_max_length": 77,
  "--wandb_key": WANDB_KEY,
  "--private_key": PRIVATE_KEY,
  "--credentials": CREDENTIALS,
  "--webhook_config": JSON.stringify([
    { webhook_type: "discord", webhook_url: `https://discord.com/api/webhooks/1234/${DISCORD_TOKEN}` },
    { webhook_type: "raw", callback_url: "https://hooks.example.invalid/in" },
  ]),
  "--resume_from": `https://alice:${URL_PASSWORD}@models.example.invalid/ckpt.safetensors`,
};
const MASKED_CONFIG = {
  ...CONFIG,
  "--wandb_key": MASK,
  "--private_key": MASK,
  "--credentials": MASK,
  "--webhook_config": JSON.stringify([
    { webhook_type: "discord", webhook_url: MASK },
    { webhook_type: "raw", callback_url: "https://hooks.example.invalid/in" },
  ]),
  "--resume_from": `https://${MASK}@models.example.invalid/ckpt.safetensors`,
};
const DATALOADER = [
  { id: "s3-images", type: "aws", dataset_type: "image", aws_bucket_name: "portraits", aws_secret_access_key: AWS_SECRET },
  { id: "text", type: "local", dataset_type: "text_embeds", default: true, cache_dir: "cache/text" },
];
const MASKED_DATALOADER = [{ ...DATALOADER[0], aws_secret_access_key: MASK }, DATALOADER[1]];

// Every answer the viewer and bob (neither owner, lead nor admin) received in this file.
const othersSaw: Reply[] = [];
async function call(method: string, path: string, auth: Credentials, json?: unknown): Promise<Reply> {
  const reply = await t.call(method, path, { auth, ...(json === undefined ? {} : { json }) });
  if (auth === viewer || auth === bob) othersSaw.push(reply);
  return reply;
}
const unmasked = async (auth = alice) => (await call("GET", "/api/configs/secret-shapes?unmasked=true", auth)).body;

beforeAll(async () => {
  t = await startTestStack();
  const first = await setUpAdmin(t);
  admin = { key: first.key };
  alice = { key: (await createUserWithKey(t, { cookie: first.cookie }, "researcher", "alice")).key };
  bob = { key: (await createUserWithKey(t, { cookie: first.cookie }, "researcher", "bob")).key };
  lead = { key: (await createUserWithKey(t, { cookie: first.cookie }, "lead", "lena")).key };
  viewer = { key: (await createUserWithKey(t, { cookie: first.cookie }, "viewer", "vic")).key };
  expect((await call("POST", "/api/configs/environments", alice, { name: "secret-shapes" })).status).toBe(201);
  const saved = await call("PUT", "/api/configs/secret-shapes", alice, { config: CONFIG, dataloader: DATALOADER });
  expect(saved.status, saved.text).toBe(200);
});
afterAll(async () => {
  await t?.stop();
});

describe("an environment's secrets", () => {
  it("read masked for a viewer and another researcher, in the environment and its export: keys, credentials, webhook and URL credentials", async () => {
    for (const who of [viewer, bob]) {
      const shown = await call("GET", "/api/configs/secret-shapes", who);
      expect(shown.status).toBe(200);
      expect([shown.body.config, shown.body.dataloader]).toEqual([MASKED_CONFIG, MASKED_DATALOADER]);
      const exported = await call("GET", "/api/configs/secret-shapes/export", who);
      expect([exported.body.config, exported.body.dataloader]).toEqual([MASKED_CONFIG, MASKED_DATALOADER]);
    }
  });

  it("read masked for the owner, a lead and an admin too unless they ask, and as stored when they do", async () => {
    for (const who of [alice, lead, admin]) {
      const masked = await call("GET", "/api/configs/secret-shapes", who);
      expect([masked.body.config, masked.body.dataloader]).toEqual([MASKED_CONFIG, MASKED_DATALOADER]);
      const full = await unmasked(who);
      expect([full.config, full.dataloader, full.owner]).toEqual([CONFIG, DATALOADER, "alice"]);
      const exported = await call("GET", "/api/configs/secret-shapes/export?unmasked=1", who);
      expect([exported.status, exported.body.config, exported.body.dataloader]).toEqual([200, CONFIG, DATALOADER]);
    }
  });

  it("are refused unmasked to a viewer and another researcher with 403 not_owner, and an unknown name stays 404", async () => {
    for (const who of [viewer, bob]) {
      for (const path of ["/api/configs/secret-shapes?unmasked=true", "/api/configs/secret-shapes/export?unmasked=true"]) {
        const refused = await call("GET", path, who);
        expect([refused.status, refused.body.code], path).toEqual([403, "not_owner"]);
        expect(refused.body.detail).toBe(
          'Environment "secret-shapes" belongs to another user: only its owner, a lead or an admin may read its secrets; leave out unmasked to read it masked',
        );
      }
    }
    expect((await call("GET", "/api/configs/no-such-env?unmasked=true", viewer)).status).toBe(404);
  });

  it("sent back as shown keep the stored values, a new value where one is sent; another researcher sending them back changes nothing", async () => {
    const shown = (await call("GET", "/api/configs/secret-shapes", alice)).body;
    const saved = await call("PUT", "/api/configs/secret-shapes", alice, {
      config: { ...shown.config, "--lora_rank": 32, "--private_key": "-----BEGIN PRIVATE KEY-----rotated" },
      dataloader: shown.dataloader,
    });
    expect(saved.status, saved.text).toBe(200);
    expect(saved.body.config).toEqual({ ...MASKED_CONFIG, "--lora_rank": 32 });
    const after = await unmasked();
    expect([after.config, after.dataloader]).toEqual([
      { ...CONFIG, "--lora_rank": 32, "--private_key": "-----BEGIN PRIVATE KEY-----rotated" },
      DATALOADER,
    ]);

    // The attack beside it: bob sends back what he was shown, and a credential-harvesting edit.
    const bobSaw = (await call("GET", "/api/configs/secret-shapes", bob)).body;
    for (const config of [bobSaw.config, { ...bobSaw.config, "--resume_from": `https://${MASK}@collector.example.invalid/x` }]) {
      const refused = await call("PUT", "/api/configs/secret-shapes", bob, { config });
      expect([refused.status, refused.body.code]).toEqual([403, "not_owner"]);
    }
    expect(await unmasked()).toEqual(after);
  });

  it("are never re-pointed by an edit around a masked URL's credentials: 422 mask_without_value, nothing saved", async () => {
    const before = await unmasked();
    const shown = (await call("GET", "/api/configs/secret-shapes", alice)).body.config;
    const moved = await call("PUT", "/api/configs/secret-shapes", alice, {
      config: { ...shown, "--resume_from": `https://${MASK}@elsewhere.example.invalid/ckpt.safetensors` },
    });
    expect([moved.status, moved.body.code, moved.body.errors]).toEqual([
      422,
      "mask_without_value",
      [{ path: "body.config.--resume_from", message: "the mask stands for a stored value, and none is stored here" }],
    ]);
    expect(moved.body.detail).toBe(
      `--resume_from holds a URL with masked credentials ("${MASK}") that is not the stored URL as shown; send its credentials again`,
    );
    const added = await call("PUT", "/api/configs/secret-shapes", alice, {
      dataloader: [...(await call("GET", "/api/configs/secret-shapes", alice)).body.dataloader, { ...MASKED_DATALOADER[0], id: "more" }],
    });
    expect([added.status, added.body.errors?.[0]?.path]).toEqual([422, "body.dataloader[2].aws_secret_access_key"]);
    expect(await unmasked()).toEqual(before);
  });

  it("never reached the viewer or another researcher in any answer of this file, nor the service's logs", () => {
    expect(othersSaw.length).toBeGreaterThan(10);
    for (const reply of othersSaw) for (const secret of SECRETS) expect(reply.text).not.toContain(secret);
    for (const secret of SECRETS) expect(t.lines.filter((line) => line.includes(secret))).toEqual([]);
  });
});
