import { Zip, ZipPassThrough } from "fflate";
import type { PackageSummary } from "../../shared/schemas/cloud";
import { checkPath, DATASETS_PREFIX, keyOf } from "../datasets/paths";
import { ApiError } from "../errors";

/*
 * Packaging a cloud job's local datasets (spec 1 "Cloud data flow" steps 1-2, "Other cloud
 * rules"): the dataloader's `type: local` datasets are listed in R2, files that must never leave
 * the service (.env, .git, credentials, keys) are left out, and the archive is described exactly
 * (files, bytes, the zip's size) before a single byte is read, so the user confirms what will be
 * uploaded and the 100 MiB cap is enforced without building anything. The zip itself is then
 * produced as the upload reads it, one R2 object at a time.
 *
 * Every path in the summary and the archive is the dataset's key under the datasets root
 * (`datasets/<dataset>/<file>`): the same name the dataloader uses, so the rewritten
 * multidatabackend.json resolves against the folder the cloud job extracts the archive into.
 */

/** Spec 8: the largest archive a cloud submission may upload. */
export const MAX_ARCHIVE_BYTES = 100 * 1024 * 1024;
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
  /** config.json: the serialised option map (spec 1 step 1). */
  config: Uint8Array;
  /** multidatabackend.json, its local datasets' instance_data_dir rewritten to their path in the archive. */
  dataloader: Uint8Array;
}

const CONFIG_NAME = "config.json";
const DATALOADER_NAME = "multidatabackend.json";

/** Folders whose whole content stays behind, wherever they sit in a dataset. */
const EXCLUDED_FOLDERS: Record<string, string> = {
  ".git": "git repository data (.git folder)",
  ".ssh": "SSH keys folder (.ssh)",
  ".aws": "cloud credentials folder (.aws)",
};

/** Lower-cased basenames that stay behind, with the reason the summary shows. */
const EXCLUDED_FILES: [RegExp, string][] = [
  [/^\.env(\..*)?$/, "environment file (.env, .env.*)"],
  [/^\.git$/, "git metadata file (.git)"],
  [/^\.netrc$/, "login credentials file (.netrc)"],
  [/^\.npmrc$/, "package registry credentials file (.npmrc)"],
  [/^\.pypirc$/, "package registry credentials file (.pypirc)"],
  [/^credentials(\.json)?$/, "credentials file (credentials, credentials.json)"],
  [/\.(pem|key)$/, "private key or certificate (*.pem, *.key)"],
  [/\.(p12|pfx)$/, "certificate bundle with a private key (*.p12, *.pfx)"],
  [/^id_(rsa|ed25519|ecdsa)/, "SSH private key (id_rsa*, id_ed25519*, id_ecdsa*)"],
  [/\.kdbx$/, "password database (*.kdbx)"],
  [/^secrets\./, "secrets file (secrets.*)"],
  [/^\.htpasswd$/, "password file (.htpasswd)"],
];

/**
 * Why a file is never packaged (spec 1: .env, .git, credentials and keys), or null. Checks every
 * folder on the path and the file's name, case-insensitively.
 *
 * @example
 * exclusionReason("datasets/faces/.git/config"); // "git repository data (.git folder)"
 * exclusionReason("datasets/faces/001.png");     // null
 */
export function exclusionReason(path: string): string | null {
  const segments = path.split("/").filter((s) => s !== "");
  const base = path.endsWith("/") ? undefined : segments.pop()?.toLowerCase();
  for (const folder of segments) {
    const reason = EXCLUDED_FOLDERS[folder.toLowerCase()];
    if (reason) return reason;
  }
  if (base === undefined) return null;
  for (const [pattern, reason] of EXCLUDED_FILES) if (pattern.test(base)) return reason;
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
      `The archive would be ${plan.summary.archive_bytes} bytes, over the limit of ${MAX_ARCHIVE_BYTES} bytes (100 MiB)`,
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
