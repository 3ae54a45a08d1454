import { openAsBlob, readdirSync, statSync } from "node:fs";
import { basename, join, relative, sep } from "node:path";
import type { z } from "zod";
import { refusal, ServiceError, type ServiceClient } from "../../shared/client/client";
import { endpoints } from "../../shared/client/endpoints";
import type { DatasetUpload } from "../../shared/schemas/datasets";
import { UsageError } from "./output";

/*
 * `jobs datasets upload`: local files and folders into a dataset folder, as multipart forms
 * (POST /api/datasets/upload; a .zip through /upload/zip, extracted by the service). Files are
 * sent in batches, one folder at a time, so a refusal loses only its batch; a batch the service
 * refuses for its contents (a name, a type, its size) is sent again file by file, so only the
 * files at fault fail.
 */

/** The most one batch carries: well under the service's 100 MiB per request. */
export const BATCH_BYTES = 16 * 1024 * 1024;
export const BATCH_FILES = 64;

/** One local file and where it goes: the folder under --to (relative, / separated) and its name. */
export interface LocalFile {
  path: string;
  folder: string;
  name: string;
  size: number;
}

/** A request to make: several files into one folder, or one zip. */
export interface Batch {
  kind: "files" | "zip";
  folder: string;
  files: LocalFile[];
}

/** What became of an upload: each file stored, or failed with the service's reason. */
export interface UploadOutcome {
  stored: z.output<typeof DatasetUpload>[];
  failed: { path: string; reason: string }[];
}

/**
 * The files an upload sends: each file named, and every file under each folder named (keeping
 * its path relative to that folder, under the folder's own name; hidden files and folders
 * skipped). A path that does not exist is a usage error.
 *
 * @example
 * collectFiles(["portraits"], "people"); // [{ path: "portraits/a.png", folder: "people/portraits", name: "a.png", ... }]
 */
export function collectFiles(paths: string[], to: string): LocalFile[] {
  const base = to.replace(/\/+$/, "");
  const under = (...parts: string[]) => [base, ...parts].filter(Boolean).join("/");
  const files: LocalFile[] = [];
  for (const path of paths) {
    let stat;
    try {
      stat = statSync(path);
    } catch {
      throw new UsageError(`${path}: no such file or folder`);
    }
    if (stat.isFile()) {
      files.push({ path, folder: base, name: basename(path), size: stat.size });
      continue;
    }
    if (!stat.isDirectory()) throw new UsageError(`${path} is neither a file nor a folder`);
    const top = basename(path.replace(/[/\\]+$/, "")) || ".";
    const walk = (dir: string) => {
      for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
        if (entry.name.startsWith(".")) continue;
        const full = join(dir, entry.name);
        if (entry.isDirectory()) walk(full);
        else if (entry.isFile()) {
          const folder = relative(path, dir).split(sep).filter(Boolean);
          files.push({ path: full, folder: under(...(top === "." ? [] : [top]), ...folder), name: entry.name, size: statSync(full).size });
        }
      }
    };
    walk(path);
  }
  if (!files.length) throw new UsageError("no files to upload (folders' hidden files are skipped)");
  return files;
}

/** The requests for `files`: a zip alone, other files grouped by folder up to BATCH_BYTES and BATCH_FILES. */
export function batchesOf(files: LocalFile[]): Batch[] {
  const batches: Batch[] = [];
  const open = new Map<string, Batch & { bytes: number }>();
  for (const file of files) {
    if (/\.zip$/i.test(file.name)) {
      batches.push({ kind: "zip", folder: file.folder, files: [file] });
      continue;
    }
    let batch = open.get(file.folder);
    if (
      !batch ||
      batch.files.length >= BATCH_FILES ||
      batch.bytes + file.size > BATCH_BYTES ||
      batch.files.some((f) => f.name === file.name)
    ) {
      batch = { kind: "files", folder: file.folder, files: [], bytes: 0 };
      open.set(file.folder, batch);
      batches.push(batch);
    }
    batch.files.push(file);
    batch.bytes += file.size;
  }
  return batches.map(({ kind, folder, files }) => ({ kind, folder, files }));
}

/** Called as bytes go out: how many of all the upload's bytes have been sent. */
export type Progress = (sent: number) => void;

/**
 * Sends every batch in turn and collects what was stored and what failed; never throws for a
 * refusal (they are in `failed`), so one bad file does not lose the rest.
 */
export async function uploadBatches(client: ServiceClient, batches: Batch[], progress: Progress): Promise<UploadOutcome> {
  const outcome: UploadOutcome = { stored: [], failed: [] };
  let done = 0;
  const send = async (batch: Batch): Promise<void> => {
    const bytes = batch.files.reduce((sum, f) => sum + f.size, 0);
    try {
      outcome.stored.push(await sendBatch(client, batch, (sent) => progress(done + sent)));
    } catch (error) {
      const refusedContents = error instanceof ServiceError && [413, 415, 422].includes(error.status);
      if (refusedContents && batch.files.length > 1) {
        // Which file is at fault: each alone.
        for (const file of batch.files) await send({ ...batch, files: [file] });
        return;
      }
      const reason = error instanceof ServiceError ? error.detail : (error as Error).message;
      for (const file of batch.files) outcome.failed.push({ path: file.path, reason });
    }
    done += bytes;
    progress(done);
  };
  for (const batch of batches) await send(batch);
  return outcome;
}

/** The chunk size progress is counted in. */
const CHUNK = 256 * 1024;

/** One multipart request: the form is built whole (at most BATCH_BYTES), then streamed out a chunk at a time, counting. */
async function sendBatch(client: ServiceClient, batch: Batch, progress: Progress): Promise<z.output<typeof DatasetUpload>> {
  const form = new FormData();
  form.append("target_path", batch.folder);
  for (const file of batch.files) {
    const blob = await openAsBlob(file.path);
    form.append(batch.kind === "zip" ? "file" : "files[]", blob, file.name);
  }
  const encoded = new Response(form);
  const body = new Uint8Array(await encoded.arrayBuffer());
  const fileBytes = batch.files.reduce((sum, f) => sum + f.size, 0);
  let offset = 0;
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (offset >= body.length) return controller.close();
      const chunk = body.subarray(offset, offset + CHUNK);
      offset += chunk.length;
      // The form's own bytes (boundaries, headers) are not the user's: count file bytes only.
      progress(Math.min(fileBytes, Math.round((offset / body.length) * fileBytes)));
      controller.enqueue(chunk);
    },
  });
  const endpoint = batch.kind === "zip" ? endpoints.datasetUploadZip : endpoints.datasetUpload;
  const url = client.url(endpoint, {});
  const response = await fetch(url, {
    method: "POST",
    headers: {
      ...client.options.headers,
      ...client.authHeaders(),
      accept: "application/json",
      "content-type": encoded.headers.get("content-type")!,
      "content-length": String(body.length),
    },
    body: stream,
    duplex: "half",
    // The credential goes nowhere else: a redirect is an error here, not followed.
    redirect: "manual",
  } as RequestInit);
  if (response.status >= 300 && response.status < 400)
    throw new ServiceError(
      response.status,
      "redirected",
      `POST ${url.pathname} was redirected; not followed, so your credential stays here`,
    );
  if (!response.ok) throw await refusal(response);
  const parsed = endpoint.response.safeParse(await response.json());
  if (!parsed.success)
    throw new ServiceError(response.status, "unexpected_answer", `the answer of POST ${endpoint.path} is not an upload's`);
  return parsed.data;
}
