// The masking of secret-looking options (shared/secrets-mask.ts): pure functions, tested directly.
import { describe, expect, it } from "vitest";
import { isSecretKey, keepMaskedSecrets, MASK, maskSecrets, MaskWithoutValue } from "../shared/secrets-mask";
import { adminOnlyOptionsIn } from "../shared/admin-options";

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
  it("matches secret, token, password, api_key and auth anywhere in the name, in any case", () => {
    for (const key of ["--hub_token", "signing_secret", "PASSWORD", "x_Api_Key", "Authorization", "--wandb_auth"])
      expect(isSecretKey(key), key).toBe(true);
    for (const key of ["--learning_rate", "callback_url", "--model_family", "apikey_hint"]) expect(isSecretKey(key), key).toBe(false);
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
