import { Unzip, UnzipInflate } from "fflate";
import { ApiError } from "../errors";
import type { StorageBucket } from "../bucket";
import type { DatasetWrite, Reservation } from "./quota";
import { ALLOWED_EXTENSIONS, checkName, checkPath, contentTypeOf, DATASETS_PREFIX, hasAllowedExtension, keyOf } from "./paths";

/*
 * Datasets in R2 under `datasets/`: folders, file uploads and zip uploads extracted
 * here. Every name is checked before anything is written, so a refused upload writes nothing.
 * Each file is stored with its SHA-256, which the runner uses to verify its cached copy. What a
 * write adds is reserved in its folder owner's quota before the first byte is stored (quota.ts).
 */

/** Largest upload body accepted (files or a zip), and the most a zip may expand to. */
export const MAX_UPLOAD_BYTES = 100 * 1024 * 1024;
export const MAX_EXTRACTED_BYTES = 1024 * 1024 * 1024;
export const MAX_ZIP_ENTRIES = 20_000;
/** The most one zip entry may expand to (as much as a whole upload). */
export const MAX_ZIP_ENTRY_BYTES = MAX_UPLOAD_BYTES;

const bad = (field: string, message: string) =>
  new ApiError(422, "invalid_path", `${field} ${message}`, [{ path: `form.${field}`, message }]);

export function targetSegments(field: string, raw: string, allowRoot = true): string[] {
  const checked = checkPath(raw, allowRoot);
  if ("error" in checked) throw bad(field, checked.error);
  return checked.segments;
}

async function sha256(bytes: Uint8Array): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>);
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * Called with the segments a request is about to write under, after every other check and
 * before the first write: throws to refuse (edge/datasets/folders.ts: who may change a folder).
 */
export type WriteCheck = (segments: string[]) => Promise<void>;

/**
 * Called with the objects a request stores, after the write check and before the first write:
 * reserves them in their owners' quota, or throws to refuse (edge/datasets/quota.ts).
 */
export type Reserve = (writes: DatasetWrite[]) => Promise<Reservation>;

/** Stores with `write`, giving back what a failure left unwritten (`written` lists what was stored). */
async function within<T>(reservation: Reservation, write: (written: Set<string>) => Promise<T>): Promise<T> {
  const written = new Set<string>();
  try {
    return await write(written);
  } catch (error) {
    await reservation.release(written);
    throw error;
  }
}

/** A folder is a marker object `<path>/` (as S3 consoles make them), so an empty one is listed. */
export async function createFolder(
  bucket: StorageBucket,
  parentPath: string,
  folderName: string,
  mayWrite: WriteCheck,
  reserve: Reserve,
): Promise<string> {
  const parent = targetSegments("parent_path", parentPath);
  const problem = checkName(folderName);
  if (problem) throw bad("folder_name", problem);
  const segments = [...parent, folderName];
  const key = `${keyOf(segments)}/`;
  if ((await bucket.head(key)) || (await bucket.list({ prefix: key, limit: 1 })).objects.length)
    throw new ApiError(409, "exists", `The folder ${segments.join("/")} already exists`);
  await mayWrite(segments);
  await within(await reserve([{ key, bytes: 0 }]), () => bucket.put(key, new Uint8Array(0)));
  return segments.join("/");
}

export interface StoredFile {
  name: string;
  path: string;
  size: number;
  sha256: string;
}

interface Incoming {
  name: string;
  bytes: Uint8Array;
}

function checkFileName(label: string, name: string): void {
  const problem = checkName(name);
  if (problem)
    throw new ApiError(422, "invalid_file", `${label} ${JSON.stringify(name)}: the name ${problem}`, [
      { path: `form.files`, message: `${name}: ${problem}` },
    ]);
  if (!hasAllowedExtension(name)) {
    throw new ApiError(
      415,
      "unsupported_file",
      `${label} ${JSON.stringify(name)} is not an image or a .txt/.jsonl/.csv file (allowed: ${ALLOWED_EXTENSIONS.join(" ")})`,
      [{ path: "form.files", message: `${name}: not allowed` }],
    );
  }
}

async function store(
  bucket: StorageBucket,
  target: string[],
  files: { segments: string[]; bytes: Uint8Array }[],
  written: Set<string>,
): Promise<StoredFile[]> {
  const stored: StoredFile[] = [];
  for (const f of files) {
    const segments = [...target, ...f.segments];
    const hash = await sha256(f.bytes);
    const name = segments[segments.length - 1]!;
    await bucket.put(keyOf(segments), f.bytes, {
      httpMetadata: { contentType: contentTypeOf(name) },
      customMetadata: { sha256: hash },
      sha256: hash,
    });
    written.add(keyOf(segments));
    stored.push({ name, path: segments.join("/"), size: f.bytes.byteLength, sha256: hash });
  }
  return stored;
}

/** Plain files into `target_path`; all names are checked first. */
export async function uploadFiles(
  bucket: StorageBucket,
  targetPath: string,
  files: Incoming[],
  mayWrite: WriteCheck,
  reserve: Reserve,
): Promise<StoredFile[]> {
  const target = targetSegments("target_path", targetPath);
  if (!files.length)
    throw new ApiError(422, "no_files", "Send the files in the files[] field", [{ path: "form.files", message: "at least one file" }]);
  for (const f of files) checkFileName("File", f.name);
  const names = new Set<string>();
  for (const f of files) {
    if (names.has(f.name)) throw new ApiError(422, "duplicate_file", `File ${JSON.stringify(f.name)} is sent twice`);
    names.add(f.name);
  }
  await mayWrite(target);
  const reservation = await reserve(files.map((f) => ({ key: keyOf([...target, f.name]), bytes: f.bytes.byteLength })));
  return within(reservation, (written) =>
    store(
      bucket,
      target,
      files.map((f) => ({ segments: [f.name], bytes: f.bytes })),
      written,
    ),
  );
}

// Unix file type bits in a zip entry's external attributes (upper 16 bits): a symbolic link.
const S_IFMT = 0o170000;
const S_IFLNK = 0o120000;

/**
 * A zip extracted into `target_path`. Refused, naming the entry, with nothing written: a path
 * leaving the target (zip-slip: "..", absolute, backslashes), a symbolic link, a file type that
 * is not allowed, more than MAX_ZIP_ENTRIES entries or MAX_EXTRACTED_BYTES in all. Folders in the
 * zip become folders; macOS metadata (__MACOSX/, .DS_Store) is skipped.
 */
export async function uploadZip(
  bucket: StorageBucket,
  targetPath: string,
  zip: Uint8Array,
  mayWrite: WriteCheck,
  reserve: Reserve,
): Promise<{ files: StoredFile[]; skipped: string[] }> {
  const target = targetSegments("target_path", targetPath);
  const refuse = (entry: string, message: string, status: 415 | 422 = 422) =>
    new ApiError(status, "invalid_zip_entry", `Zip entry ${JSON.stringify(entry)} ${message}; nothing was extracted`, [
      { path: "form.file", message: `${entry}: ${message}` },
    ]);
  const notZip = (why: string) =>
    new ApiError(422, "invalid_zip", `The file is not a readable zip: ${why}`, [{ path: "form.file", message: "not a zip" }]);
  const skipped: string[] = [];
  const attributes = externalAttributes(zip);
  if (attributes === null) throw notZip("it has no end of central directory record");
  let sizes: Map<string, number>;
  try {
    sizes = scanZip(zip, refuse);
  } catch (error) {
    if (error instanceof ApiError) throw error;
    throw notZip((error as Error).message);
  }
  const files: { name: string; segments: string[] }[] = [];
  for (const name of sizes.keys()) {
    if (name.startsWith("__MACOSX/") || name.endsWith(".DS_Store")) {
      skipped.push(name);
      continue;
    }
    const mode = (attributes.get(name) ?? 0) >>> 16;
    if ((mode & S_IFMT) === S_IFLNK) throw refuse(name, "is a symbolic link");
    if (name.endsWith("/")) {
      const checked = checkPath(name, false);
      if ("error" in checked) throw refuse(name, checked.error);
      continue; // folders appear through their files
    }
    const checked = checkPath(name, false);
    if ("error" in checked) throw refuse(name, checked.error);
    const base = checked.segments[checked.segments.length - 1]!;
    if (!hasAllowedExtension(base))
      throw refuse(name, `is not an image or a .txt/.jsonl/.csv file (allowed: ${ALLOWED_EXTENSIONS.join(" ")})`, 415);
    files.push({ name, segments: checked.segments });
  }
  if (!files.length)
    throw new ApiError(422, "empty_zip", "The zip holds no files to extract", [{ path: "form.file", message: "no files" }]);
  // Extracted into the root, a zip writes into each of its own top-level folders (or the root itself).
  const written = target.length
    ? [target]
    : [...new Set(files.map((f) => (f.segments.length > 1 ? f.segments[0]! : "")))].map((top) => (top ? [top] : []));
  for (const segments of written) await mayWrite(segments);
  const reservation = await reserve(files.map((f) => ({ key: keyOf([...target, ...f.segments]), bytes: sizes.get(f.name) ?? 0 })));
  const extracted = await within(reservation, (stored) =>
    extractInto(bucket, target, zip, new Map(files.map((f) => [f.name, f.segments])), stored),
  );
  return { files: extracted, skipped };
}

/** How much of the zip is inflated at a time: at most about 1,000 times this is produced per step. */
const ZIP_STEP_BYTES = 4 * 1024;

/** Feeds a zip to fflate's streaming unzipper ZIP_STEP_BYTES at a time, awaiting `between` after each step. */
async function feedZip(unzip: Unzip, zip: Uint8Array, between: () => Promise<void> = async () => {}): Promise<void> {
  for (let at = 0; at < zip.byteLength; at += ZIP_STEP_BYTES) {
    unzip.push(zip.subarray(at, at + ZIP_STEP_BYTES), at + ZIP_STEP_BYTES >= zip.byteLength);
    await between();
  }
}

/**
 * The entry names of a zip with the bytes each inflates to, after inflating every entry as a
 * stream and counting the bytes as they are produced (none is kept): past MAX_ZIP_ENTRY_BYTES in one entry or
 * MAX_EXTRACTED_BYTES in all (413 zip_too_large), or past MAX_ZIP_ENTRIES entries (422), it
 * stops at once. The sizes entries declare are not trusted: a zip bomb declares little and
 * inflates to much.
 */
function scanZip(zip: Uint8Array, refuse: (entry: string, message: string) => ApiError): Map<string, number> {
  const sizes = new Map<string, number>();
  let entries = 0;
  let produced = 0;
  const unzip = new Unzip();
  unzip.register(UnzipInflate);
  unzip.onfile = (file) => {
    if (++entries > MAX_ZIP_ENTRIES) throw refuse(file.name, `is past the limit of ${MAX_ZIP_ENTRIES} entries`);
    let entry = 0;
    // An entry named twice is extracted twice: the last one stays.
    sizes.set(file.name, 0);
    file.ondata = (error, data) => {
      if (error) throw error;
      entry += data.byteLength;
      sizes.set(file.name, entry);
      produced += data.byteLength;
      if (entry > MAX_ZIP_ENTRY_BYTES)
        throw new ApiError(
          413,
          "zip_too_large",
          `Zip entry ${JSON.stringify(file.name)} expands to more than ${MAX_ZIP_ENTRY_BYTES} bytes (counted while extracting, whatever it declares); nothing was extracted`,
        );
      if (produced > MAX_EXTRACTED_BYTES)
        throw new ApiError(
          413,
          "zip_too_large",
          `The zip expands to more than ${MAX_EXTRACTED_BYTES} bytes (counted while extracting, whatever its entries declare); nothing was extracted`,
        );
    };
    file.start();
  };
  // Synchronous: every step's callbacks run inside push.
  for (let at = 0; at < zip.byteLength; at += ZIP_STEP_BYTES)
    unzip.push(zip.subarray(at, at + ZIP_STEP_BYTES), at + ZIP_STEP_BYTES >= zip.byteLength);
  return sizes;
}

/**
 * Extracts the `wanted` entries (name -> segments under `target`) of a zip that scanZip passed,
 * storing each one as soon as it is complete: only one entry's bytes are held at a time.
 */
async function extractInto(
  bucket: StorageBucket,
  target: string[],
  zip: Uint8Array,
  wanted: Map<string, string[]>,
  written: Set<string>,
): Promise<StoredFile[]> {
  const complete: { segments: string[]; bytes: Uint8Array }[] = [];
  const stored: StoredFile[] = [];
  const unzip = new Unzip();
  unzip.register(UnzipInflate);
  unzip.onfile = (file) => {
    const segments = wanted.get(file.name);
    if (!segments) return; // not started: fflate skips its bytes
    const chunks: Uint8Array[] = [];
    file.ondata = (error, data, final) => {
      if (error) throw error;
      chunks.push(data);
      if (final) complete.push({ segments, bytes: concatBytes(chunks) });
    };
    file.start();
  };
  await feedZip(unzip, zip, async () => {
    if (complete.length) stored.push(...(await store(bucket, target, complete.splice(0), written)));
  });
  return stored;
}

function concatBytes(chunks: Uint8Array[]): Uint8Array {
  if (chunks.length === 1) return chunks[0]!;
  const out = new Uint8Array(chunks.reduce((n, c) => n + c.byteLength, 0));
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}

/**
 * Each entry's external file attributes from the zip's central directory, which fflate does not
 * expose: where the Unix file type (a symbolic link) is recorded. Null when the file has no
 * central directory (not a zip).
 */
function externalAttributes(zip: Uint8Array): Map<string, number> | null {
  const view = new DataView(zip.buffer, zip.byteOffset, zip.byteLength);
  const out = new Map<string, number>();
  // End of central directory: signature 0x06054b50 within the last 64 KiB + 22 bytes.
  let eocd = -1;
  for (let i = zip.byteLength - 22; i >= Math.max(0, zip.byteLength - 65_557); i--) {
    if (view.getUint32(i, true) === 0x06054b50) {
      eocd = i;
      break;
    }
  }
  if (eocd < 0) return null;
  let at = view.getUint32(eocd + 16, true);
  const total = view.getUint16(eocd + 10, true);
  const decoder = new TextDecoder();
  for (let n = 0; n < total && at + 46 <= zip.byteLength && view.getUint32(at, true) === 0x02014b50; n++) {
    const nameLength = view.getUint16(at + 28, true);
    const extraLength = view.getUint16(at + 30, true);
    const commentLength = view.getUint16(at + 32, true);
    const external = view.getUint32(at + 38, true);
    out.set(decoder.decode(zip.subarray(at + 46, at + 46 + nameLength)), external);
    at += 46 + nameLength + extraLength + commentLength;
  }
  return out;
}

/** Every page of a listing (R2 returns at most 1,000 keys at a time). */
async function* listPages(bucket: StorageBucket, prefix: string, delimiter?: string) {
  let cursor: string | undefined;
  do {
    const page = await bucket.list({ prefix, delimiter, cursor, include: ["customMetadata"] });
    yield page;
    cursor = page.truncated ? page.cursor : undefined;
  } while (cursor);
}

/** The most keys one R2 list call returns. */
const R2_LIST_LIMIT = 1000;

/** Orders keys as R2 does: by their UTF-8 bytes, which is the order of their code points (not of UTF-16 units). */
function compareKeys(a: string, b: string): number {
  const x = [...a];
  const y = [...b];
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    const d = x[i]!.codePointAt(0)! - y[i]!.codePointAt(0)!;
    if (d !== 0) return d;
  }
  return x.length - y.length;
}

export interface DatasetEntry {
  name: string;
  size: number;
  sha256: string | null;
  uploaded: string;
}

/**
 * One page of the folders and files directly under `path`, in key order, folders and files
 * together: at most `limit` entries after `after` (the last entry of the page before: a file's
 * name, or a folder's name with its `/`). `next` is where the next page starts; null on the last.
 *
 * @example
 * const page = await listDatasets(bucket, "portraits", { limit: 500, after: null }); // then { after: page.next }
 */
export async function listDatasets(
  bucket: StorageBucket,
  path: string,
  page: { limit: number; after: string | null },
): Promise<{ path: string; folders: string[]; files: DatasetEntry[]; next: string | null }> {
  const segments = targetSegments("path", path);
  const prefix = segments.length ? `${keyOf(segments)}/` : DATASETS_PREFIX;
  // After a folder, on past every key under it: "<name>0" sorts right after "<name>/...", and is
  // no dataset's key (a file's name ends in an allowed extension, a folder's in /).
  const startAfter = page.after === null ? undefined : prefix + (page.after.endsWith("/") ? `${page.after.slice(0, -1)}0` : page.after);
  const entries: ({ key: string; folder: true } | { key: string; folder: false; file: DatasetEntry })[] = [];
  let cursor: string | undefined;
  let more = false;
  do {
    const listed = await bucket.list({
      prefix,
      delimiter: "/",
      startAfter,
      cursor,
      limit: Math.min(R2_LIST_LIMIT, page.limit + 1),
      include: ["customMetadata"],
    });
    for (const p of listed.delimitedPrefixes) entries.push({ key: p, folder: true });
    for (const o of listed.objects)
      if (o.key !== prefix)
        entries.push({
          key: o.key,
          folder: false,
          file: {
            name: o.key.slice(prefix.length),
            size: o.size,
            sha256: o.customMetadata?.sha256 ?? null,
            uploaded: o.uploaded.toISOString(),
          },
        });
    cursor = listed.truncated ? listed.cursor : undefined;
    more = cursor !== undefined;
  } while (more && entries.length <= page.limit);
  entries.sort((a, b) => compareKeys(a.key, b.key));
  const shown = entries.slice(0, page.limit);
  const last = shown[shown.length - 1];
  return {
    path: segments.join("/"),
    folders: shown.flatMap((e) => (e.folder ? [e.key.slice(prefix.length, -1)] : [])),
    files: shown.flatMap((e) => (e.folder ? [] : [e.file])),
    next: last && entries.length > page.limit ? last.key.slice(prefix.length) : null,
  };
}

/**
 * Deletes a file, or a folder with everything under it; `release` gives its room back to the
 * folder's owner (quota.ts). 404 when there is nothing at `path`; the root itself is refused.
 * Checked like a write (`mayWrite`: only the folder's owner, leads and admins).
 *
 * @example
 * await deleteDataset(bucket, "portraits/edits", mayWrite, (deleted) => releaseDeleted(db, deleted));
 */
export async function deleteDataset(
  bucket: StorageBucket,
  path: string,
  mayWrite: WriteCheck,
  release: (deleted: DatasetWrite[]) => Promise<void>,
): Promise<{ path: string; files: number; bytes: number }> {
  const segments = targetSegments("path", path, false);
  const file = await bucket.head(keyOf(segments));
  const under = `${keyOf(segments)}/`;
  const first = file ? null : await bucket.list({ prefix: under, limit: 1 });
  if (!file && !first?.objects.length) throw new ApiError(404, "not_found", `There is no dataset file or folder ${segments.join("/")}`);
  await mayWrite(segments);
  const deleted: DatasetWrite[] = [];
  if (file) {
    await bucket.delete(file.key);
    deleted.push({ key: file.key, bytes: file.size });
  } else {
    // Listed again from the start each time: what is deleted is no longer listed.
    for (;;) {
      const page = await bucket.list({ prefix: under, limit: 1000 });
      if (!page.objects.length) break;
      await bucket.delete(page.objects.map((o) => o.key));
      deleted.push(...page.objects.map((o) => ({ key: o.key, bytes: o.size })));
    }
  }
  await release(deleted);
  return { path: segments.join("/"), files: deleted.length, bytes: deleted.reduce((n, d) => n + d.bytes, 0) };
}

/** Every file under a dataset path, recursively, with size and SHA-256: what a runner caches. */
export async function datasetManifest(
  bucket: StorageBucket,
  path: string,
): Promise<{ path: string; files: { path: string; size: number; sha256: string | null }[] }> {
  const segments = targetSegments("path", path, false);
  const prefix = `${keyOf(segments)}/`;
  const files: { path: string; size: number; sha256: string | null }[] = [];
  for await (const page of listPages(bucket, prefix)) {
    for (const o of page.objects)
      if (!o.key.endsWith("/")) files.push({ path: o.key.slice(prefix.length), size: o.size, sha256: o.customMetadata?.sha256 ?? null });
  }
  return { path: segments.join("/"), files };
}
