// The masking of secret-looking options (shared/secrets-mask.ts): pure functions, tested directly.
import { describe, expect, it } from "vitest";
import { isSecretKey, keepMaskedSecrets, MASK, maskSecrets, maskUrlsIn, MaskWithoutValue } from "../../shared/secrets-mask";
import { adminOnlyOptionsIn } from "../../shared/admin-options";

const hooks = JSON.stringify([
  {
    webhook_type: "raw",
    callback_url: "https://hooks.example.com/in",
    signing_secret: "whsec_real",
    headers: { Authorization: "Bearer abc", "X-Team": "vision" },
  },
  { callback_url: "https://other.example.com", nested: [{ api_key: "k-123" }] },
]);

describe("isSecretKey", () => {
  it("matches secret, token, password, api_key and auth in the name, in any case", () => {
    for (const key of ["--hub_token", "signing_secret", "PASSWORD", "x_Api_Key", "Authorization", "--wandb_auth"])
      expect(isSecretKey(key), key).toBe(true);
  });

  it("matches keys, credentials, private keys, passphrases and webhook addresses, in any spelling", () => {
    for (const key of [
      "--wandb_key",
      "--private_key",
      "--private_key_passphrase",
      "--credentials",
      "google_application_credentials",
      "webhook_url",
      "webhookUrl",
      "discord_webhook",
      "apiKey",
      "APIKey",
      "hubToken",
      "githubtoken",
      "aws_access_key_id",
      "aws_secret_access_key",
      "X-Amz-Signature",
      "db_pass",
      "clientSecret",
      "oauth",
      "Set-Cookie",
      "sentry_dsn",
    ])
      expect(isSecretKey(key), key).toBe(true);
  });

  it("leaves harmless training options readable, tokenizer and webhook settings included", () => {
    for (const key of [
      "--learning_rate",
      "--lora_rank",
      "--max_train_steps",
      "--model_type",
      "--model_family",
      "--tokenizer_max_length",
      "--max_tokens",
      "--webhook_config",
      "--webhook_reporting_interval",
      "webhook_type",
      "callback_url",
      "--author",
      "--hub_private_repo",
      "--num_passes",
      "--keep_vae_loaded",
      "--validation_prompt",
    ])
      expect(isSecretKey(key), key).toBe(false);
  });
});

describe("maskUrlsIn", () => {
  it("masks the user info of every URL in the text, a token alone or a password holding an @, keeping where it points", () => {
    expect(maskUrlsIn("postgres://alice:p@ss@db.example.com:5432/runs?sslmode=require")).toBe(
      `postgres://${MASK}@db.example.com:5432/runs?sslmode=require`,
    );
    expect(maskUrlsIn("git clone https://ghp_t0ken@github.com/o/r.git && curl https://u:p@h.example.com/x")).toBe(
      `git clone https://${MASK}@github.com/o/r.git && curl https://${MASK}@h.example.com/x`,
    );
    expect(maskUrlsIn("https://a.example.com/,redis://:pw@cache:6379/0")).toBe(`https://a.example.com/,redis://${MASK}@cache:6379/0`);
  });

  it("masks the values of secret-looking query parameters only", () => {
    expect(maskUrlsIn("https://s3.example.com/b/k?X-Amz-Credential=AKIA&X-Amz-Date=2026&X-Amz-Signature=abc&token=t#top")).toBe(
      `https://s3.example.com/b/k?X-Amz-Credential=${MASK}&X-Amz-Date=2026&X-Amz-Signature=${MASK}&token=${MASK}#top`,
    );
  });

  it("leaves text without credentials as it is: plain URLs, an @ in a path or query, addresses that are not URLs", () => {
    for (const text of [
      "https://huggingface.co/black-forest-labs/FLUX.1-dev",
      "https://h.example.com/@alice?email=a@b.example",
      "git@github.com:org/repo.git",
      "mailto:alice@example.com",
      "a portrait, 35mm",
    ])
      expect(maskUrlsIn(text)).toBe(text);
  });

  it("takes linear time on a long value", () => {
    const started = performance.now();
    for (const text of [
      "a".repeat(1 << 20) + "://",
      "s".repeat(32) + "://" + "b".repeat(1 << 20),
      "x://y@".repeat(1 << 17),
      "https://h/?" + "a".repeat(1 << 20),
    ])
      maskUrlsIn(text);
    expect(performance.now() - started).toBeLessThan(5_000);
  });
});

describe("maskSecrets", () => {
  it("masks top-level options and keys at any depth inside a JSON-string option, leaving the rest as sent", () => {
    const masked = maskSecrets({
      "--hub_token": "hf_real",
      "--learning_rate": 0.0001,
      "--webhook_config": hooks,
      "--empty_token": "",
      "--null_secret": null,
    });
    expect(masked["--hub_token"]).toBe(MASK);
    expect(masked["--learning_rate"]).toBe(0.0001);
    expect(masked["--empty_token"]).toBe("");
    expect(masked["--null_secret"]).toBeNull();
    expect(JSON.parse(masked["--webhook_config"] as string)).toEqual([
      {
        webhook_type: "raw",
        callback_url: "https://hooks.example.com/in",
        signing_secret: MASK,
        headers: { Authorization: MASK, "X-Team": "vision" },
      },
      { callback_url: "https://other.example.com", nested: [{ api_key: MASK }] },
    ]);
    for (const secret of ["hf_real", "whsec_real", "Bearer abc", "k-123"]) expect(JSON.stringify(masked)).not.toContain(secret);
  });

  it("masks every secret shape the mask once missed: keys, credentials, private keys, webhook URLs, URLs with user info", () => {
    const stored = {
      "--wandb_key": "wandb-d0NotLeak",
      "--private_key": "-----BEGIN PRIVATE KEY-----d0NotLeak",
      "--credentials": "gcp-d0NotLeak",
      "--resume_from": "https://alice:d0NotLeak@models.example.com/ckpt.safetensors",
      "--webhook_config": JSON.stringify([
        { webhook_type: "discord", webhook_url: "https://discord.com/api/webhooks/1/d0NotLeak" },
        { webhook_type: "raw", callback_url: "https://bot:d0NotLeak@hooks.example.com/in" },
      ]),
      "--lora_rank": 16,
    };
    const masked = maskSecrets(stored);
    expect(masked).toEqual({
      "--wandb_key": MASK,
      "--private_key": MASK,
      "--credentials": MASK,
      "--resume_from": `https://${MASK}@models.example.com/ckpt.safetensors`,
      "--webhook_config": JSON.stringify([
        { webhook_type: "discord", webhook_url: MASK },
        { webhook_type: "raw", callback_url: `https://${MASK}@hooks.example.com/in` },
      ]),
      "--lora_rank": 16,
    });
    expect(JSON.stringify(masked)).not.toContain("d0NotLeak");
  });

  it("keeps a JSON string without secrets byte for byte, and leaves text that is not JSON alone", () => {
    const plain = '[ {"callback_url": "https://h.example.com"} ]';
    expect(maskSecrets({ "--webhook_config": plain, "--prompt": "{not json" })).toEqual({
      "--webhook_config": plain,
      "--prompt": "{not json",
    });
  });
});

describe("keepMaskedSecrets", () => {
  it("round-trips: what was shown, sent back, restores every stored secret at its own place", () => {
    const stored = { "--hub_token": "hf_real", "--webhook_config": hooks, "--seed": 1 };
    const shown = maskSecrets(stored);
    const back = keepMaskedSecrets({ ...shown, "--seed": 2 }, stored);
    expect(back["--hub_token"]).toBe("hf_real");
    expect(back["--seed"]).toBe(2);
    expect(JSON.parse(back["--webhook_config"] as string)).toEqual(JSON.parse(hooks));
  });

  it("takes a new value where one is sent, and keeps other secrets of the same JSON", () => {
    const stored = { "--webhook_config": hooks };
    const edited = JSON.parse(maskSecrets(stored)["--webhook_config"] as string);
    edited[0].signing_secret = "whsec_new";
    const back = JSON.parse(keepMaskedSecrets({ "--webhook_config": JSON.stringify(edited) }, stored)["--webhook_config"] as string);
    expect(back[0].signing_secret).toBe("whsec_new");
    expect(back[0].headers.Authorization).toBe("Bearer abc");
    expect(back[1].nested[0].api_key).toBe("k-123");
  });

  it("restores a URL sent back as shown, and refuses one edited around its masked credentials", () => {
    const stored = { "--resume_from": "https://alice:pw@models.example.com/a", "--prompt": `a ${MASK} cat` };
    const shown = maskSecrets(stored);
    expect(keepMaskedSecrets(shown, stored)).toEqual(stored);
    expect(() => keepMaskedSecrets({ "--resume_from": `https://${MASK}@evil.example.com/a` }, stored)).toThrow(
      /^--resume_from holds a URL with masked credentials/,
    );
    expect(keepMaskedSecrets({ "--resume_from": "https://bob:new@models.example.com/a" }, stored)).toEqual({
      "--resume_from": "https://bob:new@models.example.com/a",
    });
  });

  it("restores the masked values of a list such as a dataloader, naming a place where nothing is stored", () => {
    const stored = [{ id: "s3", type: "aws", aws_secret_access_key: "real", aws_bucket_name: "b" }];
    const shown = maskSecrets(stored);
    expect(shown[0]!.aws_secret_access_key).toBe(MASK);
    expect(keepMaskedSecrets(shown, stored)).toEqual(stored);
    expect(() => keepMaskedSecrets([...shown, { id: "new", aws_secret_access_key: MASK }], stored)).toThrow(
      /^\[1\]\.aws_secret_access_key is the mask/,
    );
  });

  it("refuses a mask that stands for nothing stored, naming its path", () => {
    expect(() => keepMaskedSecrets({ "--hub_token": MASK }, {})).toThrow(MaskWithoutValue);
    expect(() =>
      keepMaskedSecrets({ "--webhook_config": JSON.stringify([{ signing_secret: MASK }]) }, { "--webhook_config": "[]" }),
    ).toThrow(/--webhook_config\[0\]\.signing_secret/);
  });
});

describe("adminOnlyOptionsIn", () => {
  it("names --trainer_command when it is set, not --trainer", () => {
    expect(adminOnlyOptionsIn({ "--trainer_command": "bash run.sh", "--trainer": "demo" })).toEqual(["--trainer_command"]);
    expect(adminOnlyOptionsIn({ "--trainer_command": "", "--trainer": "demo" })).toEqual([]);
  });
});
