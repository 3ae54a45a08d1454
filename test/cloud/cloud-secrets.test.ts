// Secrets: the local host's lookup (its environment, then `<NAME>_FILE`, then
// SERVICE_SECRETS_DIR) and the SECRETS_HOST binding's answers, names that could be paths or the
// service's own credentials refused, Vault KV v2 against a small fake Vault, and the Worker's
// chain in order (environment, files, secrets manager, Vault).
import { createServer, type Server } from "node:http";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { registerSecretsManager, resolveSecret, SecretSourceError, secretSources, type SecretSource } from "../../edge/cloud/secrets";
import type { Env } from "../../edge/env";
import { ApiError } from "../../edge/errors";
import { answerSecretRequest, hostSecret } from "../../edge/local/secret-host";

const dir = mkdtempSync(join(tmpdir(), "secrets-test-"));
const secretsDir = join(dir, "run-secrets");
mkdirSync(secretsDir);
writeFileSync(join(dir, "token-file"), "  from-the-file\n");
writeFileSync(join(secretsDir, "REPLICATE_API_TOKEN"), "from-the-dir\n");
writeFileSync(join(secretsDir, "HF_TOKEN"), "hf-from-the-dir\n");
writeFileSync(join(dir, "outside"), "not a secret\n");
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("the host's lookup", () => {
  it("takes the environment before <NAME>_FILE before SERVICE_SECRETS_DIR, trimming files", async () => {
    const all = { REPLICATE_API_TOKEN: "from-the-env", REPLICATE_API_TOKEN_FILE: join(dir, "token-file"), SERVICE_SECRETS_DIR: secretsDir };
    expect(await hostSecret(all, "REPLICATE_API_TOKEN")).toEqual({ value: "from-the-env", source: "environment" });
    const { REPLICATE_API_TOKEN: _, ...noVariable } = all;
    expect(await hostSecret(noVariable, "REPLICATE_API_TOKEN")).toEqual({ value: "from-the-file", source: "file" });
    expect(await hostSecret({ SERVICE_SECRETS_DIR: secretsDir }, "REPLICATE_API_TOKEN")).toEqual({ value: "from-the-dir", source: "file" });
    expect(await hostSecret({ SERVICE_SECRETS_DIR: secretsDir }, "NOT_THERE")).toBeNull();
    expect(await hostSecret(all, "REPLICATE_API_TOKEN", "file")).toEqual({ value: "from-the-file", source: "file" });
    expect(await hostSecret({ SERVICE_SECRETS_DIR: secretsDir }, "HF_TOKEN", "environment")).toBeNull();
  });

  it("says so when <NAME>_FILE names a file that is not there", async () => {
    await expect(hostSecret({ X_TOKEN_FILE: join(dir, "gone") }, "X_TOKEN")).rejects.toThrow(
      `the secret file ${join(dir, "gone")} cannot be read (ENOENT)`,
    );
  });

  it("answers one secret by name over the binding: 200 with the value, 404 when absent", async () => {
    const env = { SERVICE_SECRETS_DIR: secretsDir, HF_TOKEN: "hf-env" };
    const get = (path: string, init?: RequestInit) => answerSecretRequest(new Request(`http://secrets.host${path}`, init), env);
    const found = await get("/HF_TOKEN?source=environment");
    expect([found.status, await found.text()]).toEqual([200, "hf-env"]);
    const file = await get("/HF_TOKEN?source=file");
    expect([file.status, await file.text()]).toEqual([200, "hf-from-the-dir"]);
    expect((await get("/MISSING?source=file")).status).toBe(404);
  });

  it("refuses names that could reach other files, the service's own credentials, listings and other methods (400, nothing read)", async () => {
    const env = { SERVICE_SECRETS_DIR: secretsDir, LIBSQL_AUTH_TOKEN: "db", RUNNER_TOKEN: "stw_x", lower: "x" };
    const status = async (path: string, init?: RequestInit) => {
      const response = await answerSecretRequest(new Request(`http://secrets.host${path}`, init), env);
      const text = await response.text();
      expect(text).not.toMatch(/db|stw_x|not a secret/);
      return response.status;
    };
    for (const path of [
      "/../outside?source=file",
      "/%2E%2E%2Foutside?source=file",
      "/run-secrets%2FHF_TOKEN?source=file",
      "/lower?source=environment",
      "/?source=file",
      "/LIBSQL_AUTH_TOKEN?source=environment",
      "/RUNNER_TOKEN?source=environment",
      "/HF_TOKEN",
      "/HF_TOKEN?source=vault",
      `/${"A".repeat(129)}?source=environment`,
    ])
      expect([path, await status(path)]).toEqual([path, 400]);
    expect(await status("/HF_TOKEN?source=file", { method: "POST", body: "x" })).toBe(400);
    expect(await hostSecret(env, "LIBSQL_AUTH_TOKEN")).toBeNull();
  });
});

describe("Vault (KV v2)", () => {
  let vault: Server;
  let address: string;
  const asked: { path: string; token: string | undefined }[] = [];
  beforeAll(async () => {
    vault = createServer((req, res) => {
      asked.push({ path: req.url!, token: req.headers["x-vault-token"] as string | undefined });
      if (req.headers["x-vault-token"] !== "hvs.good") return void res.writeHead(403).end('{"errors":["permission denied"]}');
      if (req.url === "/v1/secret/data/training-service")
        return void res
          .writeHead(200, { "content-type": "application/json" })
          .end(JSON.stringify({ data: { data: { REPLICATE_API_TOKEN: "r8_from_vault", NUMBER: 7 }, metadata: { version: 3 } } }));
      if (req.url === "/v1/kv/data/team/a") return void res.writeHead(200).end(JSON.stringify({ data: { data: { HF_TOKEN: "hf_team" } } }));
      res.writeHead(404).end('{"errors":[]}');
    });
    await new Promise<void>((done) => vault.listen(0, "127.0.0.1", done));
    address = `http://127.0.0.1:${(vault.address() as AddressInfo).port}`;
  });
  afterAll(() => vault.close());

  const vaultOnly = (env: Partial<Env>) => secretSources(env as Env).filter((s) => s.name === "vault");

  it("reads data.data[NAME] at the default path with the token, and only when VAULT_ADDR and VAULT_TOKEN are set", async () => {
    const env = { VAULT_ADDR: `${address}/`, VAULT_TOKEN: "hvs.good" } as Env;
    expect(await resolveSecret(env, "REPLICATE_API_TOKEN", vaultOnly(env))).toEqual({ value: "r8_from_vault", source: "vault" });
    expect(asked.at(-1)).toEqual({ path: "/v1/secret/data/training-service", token: "hvs.good" });
    // Only strings count: a number in Vault is not a token.
    expect(await resolveSecret(env, "NUMBER", vaultOnly(env))).toBeNull();
    expect(vaultOnly({ VAULT_ADDR: address })).toEqual([]);
    expect(vaultOnly({ VAULT_TOKEN: "hvs.good" })).toEqual([]);
  });

  it("reads VAULT_SECRET_PATH when set, and a path with nothing at it is no secret", async () => {
    const env = { VAULT_ADDR: address, VAULT_TOKEN: "hvs.good", VAULT_SECRET_PATH: "/kv/data/team/a" } as Env;
    expect(await resolveSecret(env, "HF_TOKEN", vaultOnly(env))).toEqual({ value: "hf_team", source: "vault" });
    const empty = { ...env, VAULT_SECRET_PATH: "kv/data/none" } as Env;
    expect(await resolveSecret(empty, "HF_TOKEN", vaultOnly(empty))).toBeNull();
  });

  it("fails loudly, without the token, when Vault refuses, is unreachable, or the path is not a path", async () => {
    const refused = { VAULT_ADDR: address, VAULT_TOKEN: "hvs.bad" } as Env;
    const error = await resolveSecret(refused, "HF_TOKEN", vaultOnly(refused)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SecretSourceError);
    expect((error as Error).message).toBe(`Vault at ${address} answered 403 for secret/data/training-service`);
    const down = { VAULT_ADDR: "http://127.0.0.1:1", VAULT_TOKEN: "hvs.good" } as Env;
    await expect(resolveSecret(down, "HF_TOKEN", vaultOnly(down))).rejects.toThrow(
      /^Vault at http:\/\/127\.0\.0\.1:1 could not be reached/,
    );
    const sneaky = { VAULT_ADDR: address, VAULT_TOKEN: "hvs.good", VAULT_SECRET_PATH: "secret/../sys/seal" } as Env;
    await expect(resolveSecret(sneaky, "HF_TOKEN", vaultOnly(sneaky))).rejects.toThrow(/^VAULT_SECRET_PATH must be a path like/);
    expect(String(error)).not.toContain("hvs.");
  });
});

describe("the Worker's chain", () => {
  const fake = (name: SecretSource["name"], values: Record<string, string>, calls: string[]): SecretSource => ({
    name,
    async get(secret) {
      calls.push(name);
      return values[secret] ?? null;
    },
  });

  it("asks the sources in order and stops at the first that has the secret", async () => {
    const calls: string[] = [];
    const sources = [
      fake("environment", { A: "env-a" }, calls),
      fake("file", { A: "file-a", B: "file-b" }, calls),
      fake("secrets_manager", { B: "sm-b", C: "sm-c" }, calls),
      fake("vault", { C: "vault-c", D: "vault-d" }, calls),
    ];
    const env = {} as Env;
    expect(await resolveSecret(env, "A", sources)).toEqual({ value: "env-a", source: "environment" });
    expect(await resolveSecret(env, "B", sources)).toEqual({ value: "file-b", source: "file" });
    expect(await resolveSecret(env, "C", sources)).toEqual({ value: "sm-c", source: "secrets_manager" });
    expect(await resolveSecret(env, "D", sources)).toEqual({ value: "vault-d", source: "vault" });
    expect(await resolveSecret(env, "E", sources)).toBeNull();
    expect(calls).toEqual([
      "environment",
      ...["environment", "file"],
      ...["environment", "file", "secrets_manager"],
      ...["environment", "file", "secrets_manager", "vault"],
      ...["environment", "file", "secrets_manager", "vault"],
    ]);
  });

  it("refuses a bad or reserved name with a 422 before asking any source", async () => {
    const calls: string[] = [];
    const sources = [fake("environment", {}, calls)];
    for (const name of ["lower", "../X", "A-B", "", "1ABC", "LIBSQL_AUTH_TOKEN", "SETUP_TOKEN", "VAULT_TOKEN"]) {
      const error = await resolveSecret({} as Env, name, sources).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ApiError);
      expect(error).toMatchObject({ status: 422, code: "invalid_secret_name" });
    }
    expect(calls).toEqual([]);
  });

  it("locally: the Worker's own binding, then the host's environment, then its files, then registered managers, then Vault", async () => {
    const hostEnv = { SERVICE_SECRETS_DIR: secretsDir, HOST_ONLY: "host-env" };
    const env = {
      WORKER_ONLY: "worker-binding",
      HF_TOKEN: "worker-hf",
      STORAGE: { get() {} },
      SECRETS_HOST: { fetch: (request: Request) => answerSecretRequest(request, hostEnv) },
      VAULT_ADDR: "http://127.0.0.1:1",
      VAULT_TOKEN: "hvs.x",
    } as unknown as Env;
    registerSecretsManager((e) =>
      e.VAULT_ADDR ? { name: "secrets_manager", get: async (n) => (n === "SM_ONLY" ? "from-sm" : null) } : null,
    );
    expect(secretSources(env).map((s) => s.name)).toEqual(["environment", "environment", "file", "secrets_manager", "vault"]);
    expect(await resolveSecret(env, "HF_TOKEN")).toEqual({ value: "worker-hf", source: "environment" });
    expect(await resolveSecret(env, "WORKER_ONLY")).toEqual({ value: "worker-binding", source: "environment" });
    expect(await resolveSecret(env, "HOST_ONLY")).toEqual({ value: "host-env", source: "environment" });
    expect(await resolveSecret(env, "REPLICATE_API_TOKEN")).toEqual({ value: "from-the-dir", source: "file" });
    expect(await resolveSecret(env, "SM_ONLY")).toEqual({ value: "from-sm", source: "secrets_manager" });
    // A binding that is not a string (an R2 bucket) is no secret; the search goes on to Vault, which is down.
    await expect(resolveSecret(env, "STORAGE")).rejects.toBeInstanceOf(SecretSourceError);
    // Deployed (no host binding, no Vault): the Worker's own bindings only.
    expect(secretSources({ HF_TOKEN: "x" } as unknown as Env).map((s) => s.name)).toEqual(["environment"]);
  });
});
