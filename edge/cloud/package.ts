import { Zip, ZipPassThrough } from "fflate";
import type { PackageSummary } from "../../shared/schemas/cloud";
import { checkPath, DATASETS_PREFIX, keyOf } from "../datasets/paths";
import { ApiError } from "../errors";

/*
 * Packaging a cloud job's local datasets (README "Cloud training"), the first steps of a cloud
 * submission: the dataloader's `type: local` datasets are listed in R2, files that must never leave
 * the service (.env, .git, credentials, keys) are left out, and the archive is described exactly
 * (files, bytes, the zip's size) before a single byte is read, so the user confirms what will be
 * uploaded and the 100 MB cap is enforced without building anything. The zip itself is then
 * produced as the upload reads it, one R2 object at a time.
 *
 * Every path in the summary and the archive is the dataset's key under the datasets root
 * (`datasets/<dataset>/<file>`): the same name the dataloader uses, so the rewritten
 * multidatabackend.json resolves against the folder the cloud job extracts the archive into.
 */

/**
 * The largest archive a cloud submission may upload, 100 MB as Replicate counts it (decimal
 * megabytes: 100 * 1000 * 1000 bytes, not 100 MiB). Replicate's docs on input files
 * (replicate.com/docs/topics/predictions/input-files): an uploaded file "will work for files up
 * to 100MB"; larger inputs must be hosted elsewhere and passed as a URL.
 */
export const MAX_ARCHIVE_BYTES = 100 * 1000 * 1000;
/** How MAX_ARCHIVE_BYTES is written in messages. */
export const MAX_ARCHIVE_LABEL = "100 MB";
/** fflate writes no zip64 records: the end record counts entries in 16 bits. */
export const MAX_ARCHIVE_ENTRIES = 65_535;

/** The R2 calls packaging makes (workerd's R2Bucket and edge/datasets/bucket.ts's Bucket both fit). */
export interface PackageBucket {
  list(options: {
    prefix: string;
    cursor?: string;
  }): Promise<{ objects: { key: string; size: number }[]; truncated: boolean; cursor?: string }>;
  get(key: string): Promise<{ size: number; body: ReadableStream<Uint8Array> } | null>;
}

export interface PackagePlan {
  summary: PackageSummary;
  /** R2 key -> path inside the zip, sorted by path; `size` is what the listing said, checked again while streaming. */
  entries: { key: string; path: string; size: number }[];
  /** config.json: the serialised option map. */
  config: Uint8Array;
  /** multidatabackend.json, its local datasets' instance_data_dir rewritten to their path in the archive. */
  dataloader: Uint8Array;
}

const CONFIG_NAME = "config.json";
const DATALOADER_NAME = "multidatabackend.json";

/*
 * What never leaves the service (.env, .git, credentials and keys). The names follow the
 * well-known lists of files that hold secrets: gitrob's file signatures
 * (github.com/michenriksen/gitrob, filesignatures.json: .netrc, .pgpass, .s3cfg, .dockercfg, .boto,
 * .htpasswd, credentials.json, the Google service-account key `<project>-<12 hex>.json`, *_rsa,
 * *.p12/*.pfx/*.jks, KeePass and keychain files, shell and database histories, terraform.tfvars,
 * names containing "credential" or "password"), and the credential files the allowed dataset
 * types (.txt, .csv, .jsonl; images) commonly carry: the AWS console's key exports
 * (credentials.csv, <user>_accessKeys.csv, rootkey.csv), token files (token.txt, hf_token.txt),
 * .git-credentials, service-account*.json(l), client_secret*.json, kaggle.json.
 *
 * A file's name is tested as it is and without one trailing .txt/.csv/.jsonl/.json (so
 * `.netrc.txt`, `id_rsa.txt` and `.git-credentials.txt` are caught like the originals). Rules
 * that look for a word in the name (credential, token, secret, password, access key, service
 * account, private key) skip images: a photo named `secret_garden.png` is not a credential.
 */

/** Folders whose whole content stays behind, wherever they sit in a dataset. */
const EXCLUDED_FOLDERS: Record<string, string> = {
  ".git": "git repository data (.git folder)",
  ".ssh": "SSH keys folder (.ssh)",
  ".gnupg": "GnuPG keys folder (.gnupg)",
  ".aws": "cloud credentials folder (.aws, .azure, gcloud)",
  ".azure": "cloud credentials folder (.aws, .azure, gcloud)",
  gcloud: "cloud credentials folder (.aws, .azure, gcloud)",
  ".docker": "container registry credentials folder (.docker)",
  ".kube": "cluster credentials folder (.kube)",
  ".huggingface": "model hub token folder (.huggingface)",
};

/** A rule over a lower-cased file name; `words`: a word in the name, tested on every file but images. */
interface ExcludedName {
  pattern: RegExp;
  reason: string;
  words?: true;
}

/** A word in a name: bounded by the name's start or end, or by - _ . or a space. */
const word = (w: string) => new RegExp(`(^|[-_. ])${w}([-_. ]|$)`);

const EXCLUDED_FILES: ExcludedName[] = [
  { pattern: /^\.env([-_.].*)?$|^\.envrc$/, reason: "environment file (.env, .env.*, .envrc)" },
  { pattern: /^\.git$/, reason: "git metadata file (.git)" },
  { pattern: /^[._]?netrc$/, reason: "login credentials file (.netrc)" },
  { pattern: /^\.?pgpass$|^\.my\.cnf$/, reason: "database password file (.pgpass, .my.cnf)" },
  { pattern: /^\.(npmrc|pypirc|yarnrc(\.yml)?)$/, reason: "package registry credentials file (.npmrc, .pypirc, .yarnrc)" },
  { pattern: /^\.?(s3cfg|boto|dockercfg)$/, reason: "cloud or registry credentials file (.s3cfg, .boto, .dockercfg)" },
  { pattern: /^\.?htpasswd$/, reason: "password file (.htpasswd)" },
  { pattern: /\.(pem|key|ppk)$/, reason: "private key or certificate (*.pem, *.key, *.ppk)" },
  { pattern: /\.(p12|pfx|pkcs12|jks|keystore)$/, reason: "key store or certificate bundle (*.p12, *.pfx, *.jks, *.keystore)" },
  {
    pattern: /^id_(rsa|dsa|ed25519|ecdsa)|_(rsa|dsa|ed25519|ecdsa)$/,
    reason: "SSH private key (id_rsa*, id_ed25519*, id_ecdsa*, *_rsa)",
  },
  { pattern: /\.(kdbx?|psafe3|agilekeychain|keychain|kwallet)$/, reason: "password database (*.kdbx, *.psafe3, *.keychain)" },
  {
    pattern: /^\.([a-z_]+_)?history$|^(bash|zsh|sh|python|psql|mysql|node_repl|irb)_history$/,
    reason: "shell or database client history (.bash_history, .psql_history, ...)",
  },
  { pattern: /\.(tfvars|tfstate)$/, reason: "Terraform variables or state (*.tfvars, *.tfstate)" },
  { pattern: /\.ovpn$/, reason: "VPN profile (*.ovpn)" },
  { pattern: /^kaggle\.json$/, reason: "Kaggle API token (kaggle.json)" },
  { pattern: /-[0-9a-f]{12}\.json$/, reason: "Google service-account key (<project>-<12 hex>.json)", words: true },
  {
    pattern: word("credentials?"),
    reason: "credentials file (credentials, credentials.csv, .git-credentials, *-credentials.json)",
    words: true,
  },
  {
    pattern: word("(access[-_ ]?keys?|rootkey|api[-_ ]?keys?)"),
    reason: "access keys file (accessKeys.csv, *_accessKeys.csv, rootkey.csv, api_key*)",
    words: true,
  },
  { pattern: /tokens?([-_. ]|$)/, reason: "token file (token.txt, hf_token.txt, *token*)", words: true },
  { pattern: word("(client[-_]?)?secrets?"), reason: "secrets file (secrets.*, client_secret*.json, *secret*)", words: true },
  { pattern: word("(pass(words?|wd)|pwd)"), reason: "password file (passwords.txt, *password*)", words: true },
  { pattern: /service[-_. ]?accounts?/, reason: "service-account key (service-account*.json, *.jsonl)", words: true },
  { pattern: word("private[-_ ]?keys?"), reason: "private key file (*private_key*)", words: true },
];

const DATA_SUFFIX = /\.(txt|csv|jsonl|json)$/;
const IMAGE_SUFFIX = /\.(png|jpe?g|webp|bmp|gif|tiff?)$/;

/**
 * Why a file is never packaged (.env, .git, credentials and keys), or null. Checks every
 * folder on the path and the file's name, case-insensitively.
 *
 * @example
 * exclusionReason("datasets/faces/.git/config");     // "git repository data (.git folder)"
 * exclusionReason("datasets/faces/hf_token.txt");     // "token file (token.txt, hf_token.txt, *token*)"
 * exclusionReason("datasets/faces/001.png");          // null
 */
export function exclusionReason(path: string): string | null {
  const segments = path.split("/").filter((s) => s !== "");
  const base = path.endsWith("/") ? undefined : segments.pop()?.toLowerCase();
  for (const folder of segments) {
    const reason = EXCLUDED_FOLDERS[folder.toLowerCase()];
    if (reason) return reason;
  }
  if (base === undefined) return null;
  const names = [base, base.replace(DATA_SUFFIX, "")];
  const image = IMAGE_SUFFIX.test(base);
  for (const { pattern, reason, words } of EXCLUDED_FILES) {
    if (words && image) continue;
    if (names.some((name) => pattern.test(name))) return reason;
  }
  return null;
}

/*
 * The bytes fflate's streaming Zip writes per entry, stored (ZipPassThrough) with sizes it learns
 * only at the end: a local header (30 + name) before the data, a data descriptor (16) after it,
 * a central directory record (46 + name); then the end record (22). Names are UTF-8.
 */
const LOCAL_HEADER_BYTES = 30;
const DATA_DESCRIPTOR_BYTES = 16;
const CENTRAL_RECORD_BYTES = 46;
const END_RECORD_BYTES = 22;

const encoder = new TextEncoder();

function entryBytes(name: string, size: number): number {
  const nameBytes = encoder.encode(name).byteLength;
  return LOCAL_HEADER_BYTES + nameBytes + size + DATA_DESCRIPTOR_BYTES + CENTRAL_RECORD_BYTES + nameBytes;
}

async function sha256Hex(bytes: Uint8Array): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>);
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** JSON with every object's keys sorted: the same option map always serialises to the same bytes. */
function canonicalJson(value: unknown, indent?: number): string {
  const sorted = (v: unknown): unknown =>
    Array.isArray(v)
      ? v.map(sorted)
      : v !== null && typeof v === "object"
        ? Object.fromEntries(
            Object.keys(v)
              .sort()
              .map((k) => [k, sorted((v as Record<string, unknown>)[k])]),
          )
        : v;
  return JSON.stringify(sorted(value), null, indent);
}

type Listed = { key: string; size: number }[];

async function listFiles(bucket: PackageBucket, prefix: string): Promise<Listed> {
  const files: Listed = [];
  let cursor: string | undefined;
  do {
    const page = await bucket.list({ prefix, cursor });
    // Folder markers (`<path>/`, as createFolder writes them) are not files.
    for (const o of page.objects) if (!o.key.endsWith("/")) files.push({ key: o.key, size: o.size });
    cursor = page.truncated ? page.cursor : undefined;
  } while (cursor);
  return files;
}

/** The dataset folder a local dataloader entry names, or null when the entry is not packaged. */
function localDatasetSegments(entry: unknown): { id: string; segments: string[] } | null {
  if (entry === null || typeof entry !== "object" || Array.isArray(entry)) return null;
  const { type, instance_data_dir: dir, id } = entry as Record<string, unknown>;
  if (type !== undefined && type !== null && type !== "local") return null;
  if (typeof dir !== "string" || !dir.startsWith(DATASETS_PREFIX)) return null;
  const name = typeof id === "string" ? id : dir;
  const checked = checkPath(dir.slice(DATASETS_PREFIX.length), false);
  if ("error" in checked)
    throw new ApiError(422, "invalid_dataset_path", `Dataset ${name}: instance_data_dir ${JSON.stringify(dir)} ${checked.error}`, [
      { path: "dataloader.instance_data_dir", message: checked.error },
    ]);
  return { id: name, segments: checked.segments };
}

/**
 * Lists every local dataset the dataloader names (following R2's pages), applies the exclusions,
 * and sizes the archive exactly, reading no file. A local dataset with no file to package is
 * refused (422 dataset_empty); entries that are not local, or not under `datasets/`, are left as
 * they are. summary_id names exactly what the user confirms: any file added, removed or resized,
 * any excluded file, any change of the configuration or the dataloader gives another id.
 *
 * @example
 * const plan = await planPackage(env.STORAGE, dataloader, config);
 * if (plan.summary.archive_bytes > plan.summary.archive_limit_bytes) throw ...; // the cap, before any upload
 */
export async function planPackage(bucket: PackageBucket, dataloader: unknown[], config: Record<string, unknown>): Promise<PackagePlan> {
  const datasets: PackageSummary["datasets"] = [];
  const entries = new Map<string, { key: string; path: string; size: number }>();
  const excluded = new Map<string, string>();
  const listings = new Map<string, Listed>();
  const rewritten: unknown[] = [];
  for (const entry of dataloader) {
    const local = localDatasetSegments(entry);
    if (!local) {
      rewritten.push(entry);
      continue;
    }
    const path = keyOf(local.segments);
    const listed = listings.get(path) ?? (await listFiles(bucket, `${path}/`));
    listings.set(path, listed);
    let files = 0;
    let bytes = 0;
    const left: string[] = [];
    for (const object of listed) {
      const reason = exclusionReason(object.key);
      if (reason) {
        excluded.set(object.key, reason);
        left.push(object.key);
        continue;
      }
      files += 1;
      bytes += object.size;
      entries.set(object.key, { key: object.key, path: object.key, size: object.size });
    }
    if (!files)
      throw new ApiError(
        422,
        "dataset_empty",
        listed.length
          ? `Dataset ${local.id} (${path}) has nothing to package: every file in it is excluded (${left.join(", ")})`
          : `Dataset ${local.id} (${path}) holds no files: upload its files, or remove it from the dataloader`,
      );
    datasets.push({ id: local.id, path, files, bytes });
    rewritten.push({ ...(entry as Record<string, unknown>), instance_data_dir: path });
  }

  const sortedEntries = [...entries.values()].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  if (sortedEntries.length + 2 > MAX_ARCHIVE_ENTRIES)
    throw new ApiError(
      422,
      "too_many_files",
      `The datasets hold ${sortedEntries.length} files; one archive holds at most ${MAX_ARCHIVE_ENTRIES - 2}: split them or bundle small files`,
    );
  const sortedExcluded = [...excluded].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([path, reason]) => ({ path, reason }));
  const configBytes = encoder.encode(canonicalJson(config, 2));
  const dataloaderBytes = encoder.encode(JSON.stringify(rewritten, null, 2));
  const archiveBytes =
    END_RECORD_BYTES +
    entryBytes(CONFIG_NAME, configBytes.byteLength) +
    entryBytes(DATALOADER_NAME, dataloaderBytes.byteLength) +
    sortedEntries.reduce((total, e) => total + entryBytes(e.path, e.size), 0);
  const confirmed = JSON.stringify({
    datasets,
    files: sortedEntries.map((e) => [e.path, e.size]),
    excluded: sortedExcluded,
    config_sha256: await sha256Hex(configBytes),
    dataloader_sha256: await sha256Hex(dataloaderBytes),
  });
  return {
    summary: {
      summary_id: (await sha256Hex(encoder.encode(confirmed))).slice(0, 32),
      datasets,
      files: sortedEntries.length,
      bytes: sortedEntries.reduce((total, e) => total + e.size, 0),
      archive_bytes: archiveBytes,
      archive_limit_bytes: MAX_ARCHIVE_BYTES,
      excluded: sortedExcluded,
    },
    entries: sortedEntries,
    config: configBytes,
    dataloader: dataloaderBytes,
  };
}

const changed = (path: string, what: string) =>
  new ApiError(409, "dataset_changed", `${path} ${what} since the summary was made; make a new summary and submit again`);

/**
 * The plan's zip, produced as it is read: each pull reads one chunk of one R2 object, so only
 * that chunk is held (backpressure), never the archive. Exactly summary.archive_bytes long. The
 * stream errors (409 dataset_changed), rather than truncating, when an object is gone or its
 * size differs from the plan's. A plan over the archive limit is refused at once (413): the
 * caller enforces the cap before uploading, and a zip without zip64 could not hold it anyway.
 *
 * @example
 * await provider.upload_file("datasets.zip", archiveStream(env.STORAGE, plan), plan.summary.archive_bytes);
 */
export function archiveStream(bucket: PackageBucket, plan: PackagePlan): ReadableStream<Uint8Array> {
  if (plan.summary.archive_bytes > MAX_ARCHIVE_BYTES)
    throw new ApiError(
      413,
      "archive_too_large",
      `The archive would be ${plan.summary.archive_bytes} bytes, over the limit of ${MAX_ARCHIVE_BYTES} bytes (${MAX_ARCHIVE_LABEL})`,
    );
  const sources: ({ path: string; bytes: Uint8Array } | { path: string; key: string; size: number })[] = [
    { path: CONFIG_NAME, bytes: plan.config },
    { path: DATALOADER_NAME, bytes: plan.dataloader },
    ...plan.entries,
  ];
  let next = 0;
  let produced = 0;
  let ended = false;
  let zipFailure: Error | null = null;
  let current: { file: ZipPassThrough; reader: ReadableStreamDefaultReader<Uint8Array>; path: string; size: number; read: number } | null =
    null;
  let output!: ReadableStreamDefaultController<Uint8Array>;
  const zip = new Zip((error, chunk, final) => {
    if (error) {
      zipFailure = error;
      return;
    }
    produced += chunk.byteLength;
    output.enqueue(chunk);
    if (final) ended = true;
  });

  /** One step: a chunk of the current object, the next entry opened, or the archive's end. */
  async function step(): Promise<void> {
    if (current) {
      const { done, value } = await current.reader.read();
      if (done) {
        if (current.read !== current.size) throw changed(current.path, `is ${current.read} bytes, not ${current.size},`);
        current.file.push(new Uint8Array(0), true);
        current = null;
        return;
      }
      current.read += value.byteLength;
      if (current.read > current.size) throw changed(current.path, `grew past ${current.size} bytes`);
      current.file.push(value);
      return;
    }
    const source = sources[next++];
    if (!source) {
      zip.end();
      return;
    }
    const file = new ZipPassThrough(source.path);
    if ("bytes" in source) {
      zip.add(file);
      file.push(source.bytes, true);
      return;
    }
    const object = await bucket.get(source.key);
    if (!object) throw changed(source.path, "was removed");
    if (object.size !== source.size) throw changed(source.path, `changed size (${source.size} -> ${object.size} bytes)`);
    zip.add(file);
    current = { file, reader: object.body.getReader(), path: source.path, size: source.size, read: 0 };
  }

  return new ReadableStream<Uint8Array>({
    start(controller) {
      output = controller;
    },
    async pull(controller) {
      try {
        // A pull that enqueues nothing would not be called again: step until something is out.
        const before = produced;
        while (produced === before && !ended) {
          await step();
          if (zipFailure) throw zipFailure;
        }
        if (ended) {
          if (produced !== plan.summary.archive_bytes)
            throw new Error(`The archive came out ${produced} bytes long, not the ${plan.summary.archive_bytes} its summary gives`);
          controller.close();
        }
      } catch (error) {
        current?.reader.cancel(error).catch(() => {});
        current = null;
        zip.terminate();
        throw error;
      }
    },
    async cancel(reason) {
      await current?.reader.cancel(reason).catch(() => {});
      current = null;
      zip.terminate();
    },
  });
}
