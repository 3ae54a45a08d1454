import { unzipSync } from "fflate";
import { describe, expect, it } from "vitest";
import {
  archiveStream,
  exclusionReason,
  MAX_ARCHIVE_BYTES,
  planPackage,
  type PackageBucket,
  type PackagePlan,
} from "../../edge/cloud/package";
import { ApiError } from "../../edge/errors";

// Packaging local datasets for a cloud job: what is listed, left out, and streamed, against an
// in-memory bucket with R2's paging (1,000 keys a page) and chunked bodies.

const CHUNK = 64 * 1024;
const encoder = new TextEncoder();
const decoder = new TextDecoder();

class MemoryBucket implements PackageBucket {
  readonly objects = new Map<string, Uint8Array>();
  readonly listCalls: { prefix: string; cursor?: string }[] = [];
  readonly gets: string[] = [];

  put(key: string, value: Uint8Array | string): this {
    this.objects.set(key, typeof value === "string" ? encoder.encode(value) : value);
    return this;
  }

  async list(options: { prefix: string; cursor?: string; limit?: number }) {
    this.listCalls.push({ prefix: options.prefix, cursor: options.cursor });
    const keys = [...this.objects.keys()].filter((k) => k.startsWith(options.prefix)).sort();
    const start = options.cursor ? Number(options.cursor) : 0;
    const end = start + (options.limit ?? 1000);
    const truncated = end < keys.length;
    return {
      objects: keys.slice(start, end).map((key) => ({ key, size: this.objects.get(key)!.byteLength })),
      truncated,
      cursor: truncated ? String(end) : undefined,
    };
  }

  async head(key: string) {
    const bytes = this.objects.get(key);
    return bytes ? { key, size: bytes.byteLength } : null;
  }

  async get(key: string) {
    this.gets.push(key);
    const bytes = this.objects.get(key);
    if (!bytes) return null;
    let at = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (at >= bytes.byteLength) return controller.close();
        controller.enqueue(bytes.slice(at, at + CHUNK));
        at += CHUNK;
      },
    });
    return { size: bytes.byteLength, body };
  }
}

async function readAll(stream: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  const reader = stream.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
  }
  return new Uint8Array(Buffer.concat(chunks));
}

async function rejection(promise: Promise<unknown>): Promise<ApiError> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(ApiError);
    return error as ApiError;
  }
  throw new Error("expected a rejection");
}

function bytesOf(size: number, seed = 1): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(size);
  for (let i = 0; i < size; i++) out[i] = (i * 31 + seed) & 255;
  return out;
}
const imageDataset = (id: string, dir: string) => ({ id, type: "local", dataset_type: "image", instance_data_dir: dir });
const CONFIG = { "--model_family": "flux", "--learning_rate": 0.0001, "--max_train_steps": 100 };

/** Plans, streams and unzips: the archive's length must be the one the summary gave. */
async function packaged(bucket: MemoryBucket, dataloader: unknown[], config: Record<string, unknown> = CONFIG) {
  const plan = await planPackage(bucket, dataloader, config);
  const zip = await readAll(archiveStream(bucket, plan));
  expect(zip.byteLength).toBe(plan.summary.archive_bytes);
  return { plan, zip, files: unzipSync(zip) };
}

describe("exclusions", () => {
  it("names the reason for each kind of secret, case-insensitively, and passes dataset files", () => {
    const ENV = "environment file (.env, .env.*, .envrc)";
    const SSH = "SSH private key (id_rsa*, id_ed25519*, id_ecdsa*, *_rsa)";
    const KEY = "private key or certificate (*.pem, *.key, *.ppk)";
    const STORE = "key store or certificate bundle (*.p12, *.pfx, *.jks, *.keystore)";
    const CREDENTIALS = "credentials file (credentials, credentials.csv, .git-credentials, *-credentials.json)";
    const SECRETS = "secrets file (secrets.*, client_secret*.json, *secret*)";
    const cases: [string, string | null][] = [
      ["datasets/faces/.env", ENV],
      ["datasets/faces/.ENV.production", ENV],
      ["datasets/faces/.envrc", ENV],
      ["datasets/faces/.git/config", "git repository data (.git folder)"],
      ["datasets/faces/sub/.Git/objects/ab/cdef", "git repository data (.git folder)"],
      ["datasets/faces/.git", "git metadata file (.git)"],
      ["datasets/faces/.ssh/known_hosts", "SSH keys folder (.ssh)"],
      ["datasets/faces/.aws/config", "cloud credentials folder (.aws, .azure, gcloud)"],
      ["datasets/faces/.docker/config.json", "container registry credentials folder (.docker)"],
      ["datasets/faces/.netrc", "login credentials file (.netrc)"],
      ["datasets/faces/.npmrc", "package registry credentials file (.npmrc, .pypirc, .yarnrc)"],
      ["datasets/faces/.pypirc", "package registry credentials file (.npmrc, .pypirc, .yarnrc)"],
      ["datasets/faces/credentials", CREDENTIALS],
      ["datasets/faces/Credentials.JSON", CREDENTIALS],
      ["datasets/faces/tls/server.pem", KEY],
      ["datasets/faces/server.KEY", KEY],
      ["datasets/faces/cert.p12", STORE],
      ["datasets/faces/cert.pfx", STORE],
      ["datasets/faces/id_rsa", SSH],
      ["datasets/faces/id_ed25519.pub", SSH],
      ["datasets/faces/id_ecdsa.txt", SSH],
      ["datasets/faces/vault.kdbx", "password database (*.kdbx, *.psafe3, *.keychain)"],
      ["datasets/faces/secrets.txt", SECRETS],
      ["datasets/faces/my_secrets.txt", SECRETS],
      ["datasets/faces/.htpasswd", "password file (.htpasswd)"],
      ["datasets/faces/001.png", null],
      ["datasets/faces/.gitignore", null],
      ["datasets/faces/environment.txt", null],
      ["datasets/faces/keys.txt", null],
      ["datasets/git/001.png", null],
      ["datasets/faces/keyboard.jpg", null],
    ];
    expect(cases.map(([path]) => [path, exclusionReason(path)])).toEqual(cases);
  });

  it("leaves out the credential files of every allowed type (.txt, .csv, .jsonl) under their common names", () => {
    const TOKEN = "token file (token.txt, hf_token.txt, *token*)";
    const ACCESS = "access keys file (accessKeys.csv, *_accessKeys.csv, rootkey.csv, api_key*)";
    const CREDENTIALS = "credentials file (credentials, credentials.csv, .git-credentials, *-credentials.json)";
    const SERVICE = "service-account key (service-account*.json, *.jsonl)";
    const SECRETS = "secrets file (secrets.*, client_secret*.json, *secret*)";
    const cases: [string, string | null][] = [
      // The AWS console's exports: a new user's credentials, an access key, the root key.
      ["credentials.csv", CREDENTIALS],
      ["alice_credentials.csv", CREDENTIALS],
      ["accessKeys.csv", ACCESS],
      ["alice_accessKeys.csv", ACCESS],
      ["rootkey.csv", ACCESS],
      ["api_keys.txt", ACCESS],
      // Tokens and git's credential store, with or without a data extension.
      ["hf_token.txt", TOKEN],
      ["token.txt", TOKEN],
      ["TOKEN", TOKEN],
      ["github-token-backup.txt", TOKEN],
      ["tokens.csv", TOKEN],
      [".git-credentials", CREDENTIALS],
      [".git-credentials.txt", CREDENTIALS],
      [".git-credentials.bak", CREDENTIALS],
      ["application_default_credentials.json", CREDENTIALS],
      ["gcp-credentials.json", CREDENTIALS],
      // Service accounts and OAuth clients, also as JSON Lines.
      ["service-account.json", SERVICE],
      ["service-account.jsonl", SERVICE],
      ["service_account_prod.jsonl", SERVICE],
      ["my-project-0123456789ab.json", "Google service-account key (<project>-<12 hex>.json)"],
      ["client_secret.json", SECRETS],
      ["client_secret_1234-abc.apps.googleusercontent.com.json", SECRETS],
      ["secrets.csv", SECRETS],
      ["kaggle.json", "Kaggle API token (kaggle.json)"],
      ["passwords.txt", "password file (passwords.txt, *password*)"],
      ["private_key.txt", "private key file (*private_key*)"],
      // Dotfiles saved as text to get past the upload's type check.
      [".netrc.txt", "login credentials file (.netrc)"],
      ["_netrc", "login credentials file (.netrc)"],
      [".pgpass", "database password file (.pgpass, .my.cnf)"],
      [".pgpass.txt", "database password file (.pgpass, .my.cnf)"],
      [".s3cfg.txt", "cloud or registry credentials file (.s3cfg, .boto, .dockercfg)"],
      [".env.txt", "environment file (.env, .env.*, .envrc)"],
      [".bash_history.txt", "shell or database client history (.bash_history, .psql_history, ...)"],
      ["deploy_rsa.txt", "SSH private key (id_rsa*, id_ed25519*, id_ecdsa*, *_rsa)"],
      ["server.pem.txt", "private key or certificate (*.pem, *.key, *.ppk)"],
      ["prod.tfvars", "Terraform variables or state (*.tfvars, *.tfstate)"],
      // A dataset's own files, and images whose names merely hold one of those words.
      ["001.txt", null],
      ["metadata.jsonl", null],
      ["captions.csv", null],
      ["tokenizer_notes.txt", null],
      ["secret_garden.png", null],
      ["token_001.jpg", null],
      ["credentials_card.webp", null],
      ["passport_scan.png", null],
      ["monkey.txt", null],
    ];
    expect(cases.map(([name]) => [name, exclusionReason(`datasets/faces/${name}`)])).toEqual(cases);
  });

  it("lists a .env, a .git/ folder and a key file in the summary and keeps their bytes out of the zip", async () => {
    const secret = "HF_TOKEN=hf_live_do_not_upload";
    const bucket = new MemoryBucket()
      .put("datasets/faces/", new Uint8Array(0))
      .put("datasets/faces/001.png", bytesOf(1000))
      .put("datasets/faces/001.txt", "a face")
      .put("datasets/faces/.env", secret)
      .put("datasets/faces/.git/config", "[remote] url = https://user:pw@example.com")
      .put("datasets/faces/.git/HEAD", "ref: refs/heads/main")
      .put("datasets/faces/keys/server.key", "-----BEGIN PRIVATE KEY-----")
      .put("datasets/faces/.gitignore", "*.tmp");
    const { plan, zip, files } = await packaged(bucket, [imageDataset("faces", "datasets/faces")]);
    expect(plan.summary.excluded).toEqual([
      { path: "datasets/faces/.env", reason: "environment file (.env, .env.*, .envrc)" },
      { path: "datasets/faces/.git/HEAD", reason: "git repository data (.git folder)" },
      { path: "datasets/faces/.git/config", reason: "git repository data (.git folder)" },
      { path: "datasets/faces/keys/server.key", reason: "private key or certificate (*.pem, *.key, *.ppk)" },
    ]);
    expect(Object.keys(files)).toEqual([
      "config.json",
      "multidatabackend.json",
      "datasets/faces/.gitignore",
      "datasets/faces/001.png",
      "datasets/faces/001.txt",
    ]);
    expect(files["datasets/faces/001.png"]).toEqual(bytesOf(1000));
    expect(decoder.decode(files["datasets/faces/001.txt"])).toBe("a face");
    expect(plan.summary.datasets).toEqual([{ id: "faces", path: "datasets/faces", files: 3, bytes: 1000 + 6 + 5 }]);
    expect([plan.summary.files, plan.summary.bytes]).toEqual([3, 1011]);
    // Not even the object is opened, and nowhere in the archive are its bytes.
    expect(bucket.gets).not.toContain("datasets/faces/.env");
    expect(decoder.decode(zip)).not.toContain("hf_live_do_not_upload");
    expect(decoder.decode(zip)).not.toContain("BEGIN PRIVATE KEY");
  });
});

describe("the archive stream", () => {
  it("is exactly archive_bytes long, whatever the layout", async () => {
    const layouts: [string, [string, Uint8Array | string][]][] = [
      ["one empty file", [["datasets/tiny/empty.txt", ""]]],
      ["many small files", Array.from({ length: 300 }, (_, i) => [`datasets/many/${String(i).padStart(4, "0")}.txt`, `caption ${i}`])],
      ["a 2 MiB file", [["datasets/big/photo.png", bytesOf(2 * 1024 * 1024, 7)]]],
      [
        "unicode names",
        [
          ["datasets/猫/ネコ 1.png", bytesOf(300)],
          ["datasets/猫/émoji 😀.txt", "ça marche"],
          ["datasets/猫/sub/Ωmega.jpg", bytesOf(5000, 3)],
        ],
      ],
    ];
    for (const [, objects] of layouts) {
      const bucket = new MemoryBucket();
      for (const [key, value] of objects) bucket.put(key, value);
      const dir = objects[0]![0].split("/").slice(0, 2).join("/");
      const { plan, files } = await packaged(bucket, [imageDataset("d", dir)]);
      const expected = objects.map(([key, value]) => [key, typeof value === "string" ? encoder.encode(value) : value] as const);
      expect(plan.entries.map((e) => e.path)).toEqual(expected.map(([key]) => key).sort());
      // Buffer.equals: vitest's deep equality walks 2 MiB one element at a time.
      for (const [key, value] of expected) expect(Buffer.from(files[key]!).equals(value), key).toBe(true);
      expect(plan.summary.bytes).toBe(expected.reduce((n, [, v]) => n + v.byteLength, 0));
    }
  });

  it("opens one object at a time: while the first file streams, the next is not read", async () => {
    const bucket = new MemoryBucket();
    for (const name of ["a.png", "b.png", "c.png"]) bucket.put(`datasets/set/${name}`, bytesOf(4 * CHUNK));
    const plan = await planPackage(bucket, [imageDataset("set", "datasets/set")], CONFIG);
    const reader = archiveStream(bucket, plan).getReader();
    let read = 0;
    while (read < 2 * CHUNK) read += (await reader.read()).value!.byteLength;
    expect(bucket.gets).toEqual(["datasets/set/a.png"]);
    await reader.cancel();
  });

  it("errors, rather than truncating, when an object vanished or changed size after the plan", async () => {
    const setup = () =>
      new MemoryBucket()
        .put("datasets/set/a.png", bytesOf(3 * CHUNK))
        .put("datasets/set/b.png", bytesOf(3 * CHUNK))
        .put("datasets/set/c.png", bytesOf(10));
    const vanished = setup();
    const plan = await planPackage(vanished, [imageDataset("set", "datasets/set")], CONFIG);
    const reader = archiveStream(vanished, plan).getReader();
    await reader.read();
    vanished.objects.delete("datasets/set/b.png");
    const read = (async () => {
      for (;;) if ((await reader.read()).done) return;
    })();
    const gone = await rejection(read);
    expect([gone.status, gone.code]).toEqual([409, "dataset_changed"]);
    expect(gone.detail).toBe("datasets/set/b.png was removed since the summary was made; make a new summary and submit again");

    const resized = setup();
    const plan2 = await planPackage(resized, [imageDataset("set", "datasets/set")], CONFIG);
    resized.put("datasets/set/c.png", bytesOf(11));
    const grown = await rejection(readAll(archiveStream(resized, plan2)));
    expect(grown.detail).toBe(
      "datasets/set/c.png changed size (10 -> 11 bytes) since the summary was made; make a new summary and submit again",
    );
  });

  it("errors when an object's body is shorter than its stated size", async () => {
    const bucket = new MemoryBucket().put("datasets/set/a.png", bytesOf(100));
    const plan = await planPackage(bucket, [imageDataset("set", "datasets/set")], CONFIG);
    const lying: PackageBucket = {
      list: (o) => bucket.list(o),
      get: async (key) => {
        const object = await bucket.get(key);
        return object && { size: object.size, body: new Blob([bytesOf(60)]).stream() };
      },
    };
    const short = await rejection(readAll(archiveStream(lying, plan)));
    expect(short.detail).toBe("datasets/set/a.png is 60 bytes, not 100, since the summary was made; make a new summary and submit again");
  });
});

describe("the plan", () => {
  it("rewrites local datasets' instance_data_dir to their archive path and leaves every other entry as it is", async () => {
    const bucket = new MemoryBucket()
      .put("datasets/faces/1.png", bytesOf(10))
      .put("datasets/styles/ink/1.png", bytesOf(20))
      .put("datasets/remote/1.png", bytesOf(30));
    const dataloader = [
      { ...imageDataset("faces", "datasets/faces/"), resolution: 1024 },
      { id: "ink", dataset_type: "conditioning", instance_data_dir: "datasets/styles/ink" },
      { id: "remote", type: "aws", dataset_type: "image", instance_data_dir: "datasets/remote" },
      { id: "elsewhere", type: "local", dataset_type: "image", instance_data_dir: "/mnt/data/cats" },
      { id: "text", type: "local", dataset_type: "text_embeds", default: true, cache_dir: "cache/text" },
    ];
    const { plan, files } = await packaged(bucket, dataloader);
    const rewritten = [
      { id: "faces", type: "local", dataset_type: "image", instance_data_dir: "datasets/faces", resolution: 1024 },
      { id: "ink", dataset_type: "conditioning", instance_data_dir: "datasets/styles/ink" },
      dataloader[2],
      dataloader[3],
      dataloader[4],
    ];
    expect(JSON.parse(decoder.decode(plan.dataloader))).toEqual(rewritten);
    expect(JSON.parse(decoder.decode(files["multidatabackend.json"]))).toEqual(rewritten);
    expect(JSON.parse(decoder.decode(files["config.json"]))).toEqual(CONFIG);
    expect(plan.summary.datasets).toEqual([
      { id: "faces", path: "datasets/faces", files: 1, bytes: 10 },
      { id: "ink", path: "datasets/styles/ink", files: 1, bytes: 20 },
    ]);
    expect(bucket.listCalls.map((c) => c.prefix)).toEqual(["datasets/faces/", "datasets/styles/ink/"]);
    expect(Object.keys(files)).not.toContain("datasets/remote/1.png");
  });

  it("packages a file once when two entries name the same folder", async () => {
    const bucket = new MemoryBucket().put("datasets/faces/1.png", bytesOf(10));
    const { plan, files } = await packaged(bucket, [imageDataset("a", "datasets/faces"), imageDataset("b", "datasets/faces")]);
    expect(plan.summary.files).toBe(1);
    expect(Object.keys(files)).toEqual(["config.json", "multidatabackend.json", "datasets/faces/1.png"]);
  });

  it("gives the same summary_id for the same inputs and another for any change the user would confirm", async () => {
    const base = () =>
      new MemoryBucket()
        .put("datasets/faces/1.png", bytesOf(10))
        .put("datasets/faces/2.png", bytesOf(20))
        .put("datasets/faces/.env", "X=1");
    const without = (bucket: MemoryBucket, key: string) => (bucket.objects.delete(key), bucket);
    const dataloader = [imageDataset("faces", "datasets/faces")];
    const idOf = async (bucket: MemoryBucket, config: Record<string, unknown> = CONFIG, loader: unknown[] = dataloader) =>
      (await planPackage(bucket, loader, config)).summary.summary_id;
    const id = await idOf(base());
    expect(id).toMatch(/^[0-9a-f]{32}$/);
    expect(await idOf(base())).toBe(id);
    // The same options in another order serialise to the same config.json.
    expect(await idOf(base(), { "--max_train_steps": 100, "--learning_rate": 0.0001, "--model_family": "flux" })).toBe(id);

    const variants = [
      await idOf(base().put("datasets/faces/3.png", bytesOf(1))),
      await idOf(without(base(), "datasets/faces/2.png")),
      await idOf(base().put("datasets/faces/2.png", bytesOf(21))),
      await idOf(base().put("datasets/faces/id_rsa", "key")),
      await idOf(base(), { ...CONFIG, "--learning_rate": 0.0002 }),
      await idOf(base(), CONFIG, [{ ...imageDataset("faces", "datasets/faces"), resolution: 512 }]),
    ];
    expect(new Set([id, ...variants]).size).toBe(variants.length + 1);
  });

  it("follows R2's pages past 1,000 objects", async () => {
    const bucket = new MemoryBucket();
    for (let i = 0; i < 2345; i++) bucket.put(`datasets/huge/${String(i).padStart(5, "0")}.txt`, `c${i}`);
    const { plan, files } = await packaged(bucket, [imageDataset("huge", "datasets/huge")]);
    expect(bucket.listCalls).toEqual([
      { prefix: "datasets/huge/", cursor: undefined },
      { prefix: "datasets/huge/", cursor: "1000" },
      { prefix: "datasets/huge/", cursor: "2000" },
    ]);
    expect(plan.summary.files).toBe(2345);
    expect(Object.keys(files)).toHaveLength(2347);
    expect(decoder.decode(files["datasets/huge/02344.txt"])).toBe("c2344");
  });

  it("sizes a plan over 100 MB from the listing alone and refuses to stream it", async () => {
    const sizes = new Map(Array.from({ length: 30 }, (_, i) => [`datasets/big/${i}.png`, 5 * 1024 * 1024 + i] as const));
    const gets: string[] = [];
    const sizesOnly: PackageBucket = {
      list: async () => ({ objects: [...sizes].map(([key, size]) => ({ key, size })), truncated: false }),
      get: async (key) => {
        gets.push(key);
        throw new Error("no bytes should be read");
      },
    };
    const plan = await planPackage(sizesOnly, [imageDataset("big", "datasets/big")], CONFIG);
    const datasetBytes = [...sizes.values()].reduce((a, b) => a + b, 0);
    const namesBytes = [...sizes.keys()].reduce((n, k) => n + 2 * k.length, 0);
    const overhead = (n: number) => 30 + 16 + 46 + 2 * n;
    expect(plan.summary.bytes).toBe(datasetBytes);
    expect(plan.summary.archive_bytes).toBe(
      datasetBytes +
        namesBytes +
        30 * (30 + 16 + 46) +
        overhead("config.json".length) +
        plan.config.byteLength +
        overhead("multidatabackend.json".length) +
        plan.dataloader.byteLength +
        22,
    );
    expect(plan.summary.archive_limit_bytes).toBe(MAX_ARCHIVE_BYTES);
    expect(plan.summary.archive_bytes).toBeGreaterThan(MAX_ARCHIVE_BYTES);
    let refused: unknown;
    try {
      archiveStream(sizesOnly, plan);
    } catch (error) {
      refused = error;
    }
    expect(refused).toBeInstanceOf(ApiError);
    expect([(refused as ApiError).status, (refused as ApiError).code]).toEqual([413, "archive_too_large"]);
    expect(gets).toEqual([]);
  });
});

describe("the 100 MB cap", () => {
  /** A plan of one file of `size` bytes, sized from the listing alone (nothing is read). */
  const planOf = (size: number) =>
    planPackage(
      {
        list: async () => ({ objects: [{ key: "datasets/cap/a.png", size }], truncated: false }),
        get: async () => {
          throw new Error("no bytes should be read");
        },
      },
      [imageDataset("cap", "datasets/cap")],
      CONFIG,
    );
  const refusal = (plan: PackagePlan): ApiError | null => {
    try {
      void archiveStream({ list: async () => ({ objects: [], truncated: false }), get: async () => null }, plan).cancel();
      return null;
    } catch (error) {
      return error as ApiError;
    }
  };

  it("is 100 MB as Replicate counts (100,000,000 bytes, not 100 MiB), exactly the limit allowed and one byte more refused", async () => {
    expect(MAX_ARCHIVE_BYTES).toBe(100_000_000);
    const overhead = (await planOf(0)).summary.archive_bytes;
    const atLimit = await planOf(MAX_ARCHIVE_BYTES - overhead);
    expect(atLimit.summary).toMatchObject({ archive_bytes: 100_000_000, archive_limit_bytes: 100_000_000 });
    expect(refusal(atLimit)).toBeNull();

    const over = await planOf(MAX_ARCHIVE_BYTES - overhead + 1);
    expect(over.summary.archive_bytes).toBe(100_000_001);
    const refused = refusal(over);
    expect(refused).toBeInstanceOf(ApiError);
    expect([refused!.status, refused!.code]).toEqual([413, "archive_too_large"]);
    expect(refused!.detail).toContain("100 MB");
    expect(refused!.detail).not.toContain("MiB");

    // 100 MiB, which the old cap let through, is over.
    expect(refusal(await planOf(100 * 1024 * 1024 - overhead))?.code).toBe("archive_too_large");
  });
});

describe("careless input", () => {
  it("refuses a local dataset with no files, naming it", async () => {
    const bucket = new MemoryBucket().put("datasets/faces/1.png", bytesOf(1)).put("datasets/empty/", new Uint8Array(0));
    const error = await rejection(
      planPackage(bucket, [imageDataset("faces", "datasets/faces"), imageDataset("pets", "datasets/empty")], CONFIG),
    );
    expect([error.status, error.code, error.detail]).toEqual([
      422,
      "dataset_empty",
      "Dataset pets (datasets/empty) holds no files: upload its files, or remove it from the dataloader",
    ]);
  });

  it("refuses a local dataset whose every file is excluded, listing them", async () => {
    const bucket = new MemoryBucket().put("datasets/keys/.env", "A=1").put("datasets/keys/id_rsa", "k");
    const error = await rejection(planPackage(bucket, [imageDataset("keys", "datasets/keys")], CONFIG));
    expect([error.status, error.code, error.detail]).toEqual([
      422,
      "dataset_empty",
      "Dataset keys (datasets/keys) has nothing to package: every file in it is excluded (datasets/keys/.env, datasets/keys/id_rsa)",
    ]);
  });

  it("refuses an instance_data_dir that climbs out of the datasets root, reading nothing", async () => {
    const bucket = new MemoryBucket().put("secrets/token.txt", "x");
    for (const dir of ["datasets/../secrets", "datasets/", "datasets//faces", "datasets/a\\b"]) {
      const error = await rejection(planPackage(bucket, [imageDataset("evil", dir)], CONFIG));
      expect([error.status, error.code]).toEqual([422, "invalid_dataset_path"]);
      expect(error.detail).toContain(`Dataset evil: instance_data_dir ${JSON.stringify(dir)} `);
    }
    expect(bucket.listCalls).toEqual([]);
  });

  it("refuses more files than one zip can hold", async () => {
    const many: PackageBucket = {
      list: async () => ({
        objects: Array.from({ length: 65_534 }, (_, i) => ({ key: `datasets/m/${i}.txt`, size: 1 })),
        truncated: false,
      }),
      get: async () => null,
    };
    const error = await rejection(planPackage(many, [imageDataset("m", "datasets/m")], CONFIG));
    expect([error.status, error.code]).toEqual([422, "too_many_files"]);
  });

  it("leaves non-object dataloader entries alone", async () => {
    const bucket = new MemoryBucket();
    const plan: PackagePlan = await planPackage(bucket, [null, "x", 3, [imageDataset("a", "datasets/a")]], CONFIG);
    expect(JSON.parse(decoder.decode(plan.dataloader))).toEqual([null, "x", 3, [imageDataset("a", "datasets/a")]]);
    expect(plan.summary.files).toBe(0);
    expect(bucket.listCalls).toEqual([]);
  });
});
