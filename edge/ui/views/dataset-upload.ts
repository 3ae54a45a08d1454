// The client module itself, not ../api: this one has no page to run in and is tested in Node.
import { refusal, ServiceError } from "../../../shared/client/client";

/*
 * Uploads for the datasets view: what was dropped or chosen (a folder keeps its relative paths),
 * split into batches, each one request to POST /api/datasets/upload (or /upload/zip for a zip),
 * sent with XMLHttpRequest because fetch reports no upload progress. A batch is the unit that
 * resumes: one that failed is sent again alone; one that succeeded is never sent again.
 */

/** A file and the folder it sits in, relative to what was dropped ("" for a loose file). */
export interface PickedFile {
  file: File;
  dir: string;
}

/** One request: files into one folder, or one zip extracted into one. */
export interface Batch {
  kind: "files" | "zip";
  /** The folder written into, relative to the datasets root. */
  target: string;
  files: File[];
  bytes: number;
}

/** A batch stays under both: well inside the API's 100 MiB a request, and small enough to retry cheaply. */
export const BATCH_LIMITS = { files: 50, bytes: 32 * 1024 * 1024 };

const join = (...parts: string[]) => parts.filter(Boolean).join("/");
const isZip = (name: string) => name.toLowerCase().endsWith(".zip");
// What the system adds to a folder and no dataset wants (the API refuses these names).
const isJunk = (name: string) => name === ".DS_Store" || name === "Thumbs.db" || name === "desktop.ini" || name.startsWith("._");

/**
 * The batches that put `picked` under `base`: a zip alone (extracted where it lies), other files
 * grouped by folder, at most BATCH_LIMITS each (a file larger than the byte limit goes alone).
 *
 * @example
 * planBatches("portraits", [{ file, dir: "shots" }]); // [{ kind: "files", target: "portraits/shots", files: [file], ... }]
 */
export function planBatches(base: string, picked: PickedFile[], limits = BATCH_LIMITS): Batch[] {
  const batches: Batch[] = [];
  const open = new Map<string, Batch>();
  for (const { file, dir } of picked) {
    if (isJunk(file.name)) continue;
    const target = join(base, dir);
    if (isZip(file.name)) {
      batches.push({ kind: "zip", target, files: [file], bytes: file.size });
      continue;
    }
    let batch = open.get(target);
    if (batch && (batch.files.length >= limits.files || batch.bytes + file.size > limits.bytes)) batch = undefined;
    if (!batch) {
      batch = { kind: "files", target, files: [], bytes: 0 };
      open.set(target, batch);
      batches.push(batch);
    }
    batch.files.push(file);
    batch.bytes += file.size;
  }
  return batches;
}

/** A file input's choice: a folder chosen keeps its relative paths (webkitRelativePath). */
export function pickedFromInput(files: FileList): PickedFile[] {
  return [...files].map((file) => {
    const relative = file.webkitRelativePath;
    return { file, dir: relative.includes("/") ? relative.slice(0, relative.lastIndexOf("/")) : "" };
  });
}

/** Every file in what was dropped: folders walked (webkitGetAsEntry), their relative paths kept. */
export async function pickedFromDrop(transfer: DataTransfer): Promise<PickedFile[]> {
  const entries = [...transfer.items].map((item) => (item.kind === "file" ? item.webkitGetAsEntry() : null));
  if (entries.every((e) => e === null)) return [...transfer.files].map((file) => ({ file, dir: "" }));
  const out: PickedFile[] = [];
  const walk = async (entry: FileSystemEntry, dir: string): Promise<void> => {
    if (entry.isFile) {
      const file = await new Promise<File>((resolve, reject) => (entry as FileSystemFileEntry).file(resolve, reject));
      out.push({ file, dir });
    } else if (entry.isDirectory) {
      const reader = (entry as FileSystemDirectoryEntry).createReader();
      const inside = join(dir, entry.name);
      // readEntries answers a part at a time (100 in Chromium) until it answers none.
      for (;;) {
        const part = await new Promise<FileSystemEntry[]>((resolve, reject) => reader.readEntries(resolve, reject));
        if (!part.length) break;
        for (const child of part) await walk(child, inside);
      }
    }
  };
  for (const entry of entries) if (entry) await walk(entry, "");
  return out;
}

/** What the API answered a stored batch. */
export interface BatchStored {
  files: { path: string; size: number }[];
  skipped: string[];
}

/**
 * Sends one batch, reporting bytes sent as they go; resolves with what was stored, rejects with
 * the API's refusal (its detail and fields) as a ServiceError.
 */
export function sendBatch(batch: Batch, onProgress: (sent: number, total: number) => void): Promise<BatchStored> {
  const form = new FormData();
  form.set("target_path", batch.target);
  if (batch.kind === "zip") form.set("file", batch.files[0]!, batch.files[0]!.name);
  else for (const file of batch.files) form.append("files[]", file, file.name);
  const xhr = new XMLHttpRequest();
  return new Promise((resolve, reject) => {
    xhr.open("POST", batch.kind === "zip" ? "/api/datasets/upload/zip" : "/api/datasets/upload");
    xhr.setRequestHeader("accept", "application/json");
    xhr.upload.onprogress = (event) => onProgress(event.loaded, event.lengthComputable ? event.total : batch.bytes);
    xhr.onerror = () =>
      reject(new ServiceError(0, "unreachable", `the upload into ${batch.target || "the root"} did not reach the service`));
    xhr.onabort = () => reject(new ServiceError(0, "aborted", "the upload was cancelled"));
    xhr.onload = async () => {
      if (xhr.status >= 200 && xhr.status < 300) {
        try {
          resolve(JSON.parse(xhr.responseText) as BatchStored);
        } catch {
          reject(new ServiceError(xhr.status, "unexpected_answer", "the upload's answer is not JSON"));
        }
      } else reject(await refusal(new Response(xhr.responseText, { status: xhr.status })));
    };
    xhr.send(form);
  });
}

/** Creates folder `name` in `parent` (POST /api/datasets/folders, a form); rejects with the API's refusal. */
export async function createDatasetFolder(parent: string, name: string): Promise<{ path: string }> {
  const form = new FormData();
  form.set("parent_path", parent);
  form.set("folder_name", name);
  const response = await fetch("/api/datasets/folders", { method: "POST", body: form, headers: { accept: "application/json" } });
  if (!response.ok) throw await refusal(response);
  return (await response.json()) as { path: string };
}
