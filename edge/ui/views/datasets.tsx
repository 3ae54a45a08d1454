import { useEffect, useRef, useState } from "preact/hooks";
import type { z } from "zod";
import type { DatasetListing, DatasetUsage } from "../../../shared/schemas/datasets";
import { asServiceError, call, endpoints, type ServiceError } from "../api";
import { ConfirmButton } from "../components/controls";
import { ErrorNote } from "../components/error-note";
import { Field, formValues } from "../components/field";
import { formatTime } from "../components/format";
import { Page, Panel } from "../components/page";
import { useCursorPages } from "../components/paging";
import { useAction, useLoad } from "../components/use-load";
import { href, navigate } from "../router";
import { can } from "../session";
import type { ViewProps } from "../view-props";
import {
  createDatasetFolder,
  pickedFromDrop,
  pickedFromInput,
  planBatches,
  sendBatch,
  type Batch,
  type PickedFile,
} from "./dataset-upload";
import "./datasets.css";

type Listing = z.output<typeof DatasetListing>;
type Usage = z.output<typeof DatasetUsage>;
type ListedFile = Listing["files"][number];

/** Entries a page of the folder shows (each image's caption is read with it). */
const PAGE_SIZE = 100;
/** Larger images are linked, not loaded as thumbnails. */
const THUMBNAIL_MAX_BYTES = 8 * 1024 * 1024;
const IMAGE = /\.(png|jpe?g|webp|gif|bmp)$/i;

/** Bytes as B, KB, MB, GB (powers of 1024). */
export function formatBytes(bytes: number): string {
  const units = ["B", "KB", "MB", "GB", "TB"];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${unit === 0 ? value : value.toFixed(1)} ${units[unit]}`;
}

/** A file's address; `sha256` keys the browser's cache to its content, so a replaced file is fetched anew. */
const fileUrl = (path: string, sha256?: string | null) =>
  `/api/datasets/file?path=${encodeURIComponent(path)}${sha256 ? `&v=${sha256.slice(0, 16)}` : ""}`;
const joinPath = (...parts: string[]) => parts.filter(Boolean).join("/");

/** Where the page is: each folder up to here a link, the last one the current place. */
function Breadcrumbs({ segments }: { segments: string[] }) {
  return (
    <nav aria-label="Breadcrumb" class="breadcrumbs">
      <ol>
        <li>{segments.length ? <a href={href("datasets")}>Datasets</a> : <span aria-current="page">Datasets</span>}</li>
        {segments.map((segment, i) => (
          <li key={i}>
            {i === segments.length - 1 ? (
              <span aria-current="page">{segment}</span>
            ) : (
              <a href={href("datasets", ...segments.slice(0, i + 1))}>{segment}</a>
            )}
          </li>
        ))}
      </ol>
    </nav>
  );
}

/** The quota of the folder's owner (at the root: the caller's own). */
function QuotaUse({ usage }: { usage: Usage }) {
  const whose = usage.folder === null ? "Your datasets" : usage.owner ? `${usage.owner}'s datasets (owner of ${usage.folder})` : null;
  if (!whose) return <p class="muted">Folder {usage.folder} has no owner: it counts against nobody's quota.</p>;
  const percent = usage.max_bytes ? Math.min(100, Math.round((usage.used_bytes / usage.max_bytes) * 100)) : 0;
  return (
    <div class="quota">
      <p>
        {whose}: {formatBytes(usage.used_bytes)} of {formatBytes(usage.max_bytes)} ({percent}%), {usage.used_files} of {usage.max_files}{" "}
        files.
      </p>
      <meter min={0} max={usage.max_bytes} value={usage.used_bytes} aria-label={`Quota used by ${whose}`} />
    </div>
  );
}

interface BatchState {
  batch: Batch;
  state: "waiting" | "sending" | "done" | "failed";
  sent: number;
  stored: number;
  error: ServiceError | null;
}

/** The upload in progress: its batches sent one at a time, each retried alone when it failed. */
function useUploads(onStored: () => Promise<void>) {
  const [batches, setBatches] = useState<BatchState[]>([]);
  const running = useRef(false);
  const states = useRef<BatchState[]>([]);
  const update = (next: BatchState[]) => {
    states.current = next;
    setBatches(next);
  };
  const patch = (index: number, change: Partial<BatchState>) =>
    update(states.current.map((b, i) => (i === index ? { ...b, ...change } : b)));
  const pump = async () => {
    if (running.current) return;
    running.current = true;
    try {
      for (;;) {
        const index = states.current.findIndex((b) => b.state === "waiting");
        if (index < 0) break;
        const { batch } = states.current[index]!;
        patch(index, { state: "sending", sent: 0, error: null });
        try {
          const stored = await sendBatch(batch, (sent, total) =>
            patch(index, { sent: Math.min(sent, total) * (batch.bytes / (total || 1)) }),
          );
          patch(index, { state: "done", sent: batch.bytes, stored: stored.files.length });
        } catch (error) {
          patch(index, { state: "failed", error: asServiceError(error) });
        }
      }
    } finally {
      running.current = false;
      await onStored();
    }
  };
  return {
    batches,
    add(more: Batch[]) {
      // Batches already stored from an earlier upload are forgotten; failed ones stay to retry.
      update([
        ...states.current.filter((b) => b.state !== "done"),
        ...more.map((batch) => ({ batch, state: "waiting" as const, sent: 0, stored: 0, error: null })),
      ]);
      void pump();
    },
    retry(index: number) {
      patch(index, { state: "waiting", error: null });
      void pump();
    },
    clear() {
      update(states.current.filter((b) => b.state === "sending" || b.state === "waiting"));
    },
  };
}

/** Dropping or choosing files, the progress of their upload and each batch's outcome. */
function UploadPanel({ path, onStored }: { path: string; onStored: () => Promise<void> }) {
  const uploads = useUploads(onStored);
  const [over, setOver] = useState(false);
  const [note, setNote] = useState("");
  const start = (picked: PickedFile[]) => {
    const batches = planBatches(path, picked);
    setNote(batches.length ? "" : "Nothing to upload: no files were found in what was dropped.");
    if (batches.length) uploads.add(batches);
  };
  // Anything dropped anywhere on the page lands here (not only on the dashed area); the latest
  // `start` is called, so a drop after paging or a reload uses this render's folder and reload.
  const latestStart = useRef(start);
  latestStart.current = start;
  useEffect(() => {
    const carriesFiles = (event: DragEvent) => event.dataTransfer?.types.includes("Files") ?? false;
    const dragOver = (event: DragEvent) => {
      if (!carriesFiles(event)) return;
      event.preventDefault();
      setOver(true);
    };
    const dragLeave = (event: DragEvent) => {
      if (event.relatedTarget === null) setOver(false);
    };
    const drop = (event: DragEvent) => {
      if (!carriesFiles(event)) return;
      event.preventDefault();
      setOver(false);
      void pickedFromDrop(event.dataTransfer!).then((picked) => latestStart.current(picked));
    };
    document.addEventListener("dragover", dragOver);
    document.addEventListener("dragleave", dragLeave);
    document.addEventListener("drop", drop);
    return () => {
      document.removeEventListener("dragover", dragOver);
      document.removeEventListener("dragleave", dragLeave);
      document.removeEventListener("drop", drop);
    };
  }, []);
  const total = uploads.batches.reduce((n, b) => n + b.batch.bytes, 0);
  const sent = uploads.batches.reduce((n, b) => n + (b.state === "done" ? b.batch.bytes : b.sent), 0);
  const percent = total ? Math.floor((sent / total) * 100) : 0;
  const failed = uploads.batches.filter((b) => b.state === "failed").length;
  const busy = uploads.batches.some((b) => b.state === "sending" || b.state === "waiting");
  return (
    <Panel title="Upload">
      <div class={`drop-zone${over ? " drop-over" : ""}`}>
        <p>
          Drop a folder, images with their <code>.txt</code> captions, or a <code>.zip</code> anywhere on this page, or choose them. They go
          into <strong>{path || "the datasets root"}</strong>; a folder keeps its own folders.
        </p>
        <div class="row">
          <Field label="Choose files or a zip">
            <input
              type="file"
              multiple
              accept="image/*,.txt,.csv,.jsonl,.zip"
              onChange={(event) => {
                const input = event.currentTarget;
                if (input.files?.length) start(pickedFromInput(input.files));
                input.value = "";
              }}
            />
          </Field>
          <Field label="Choose a folder">
            <input
              type="file"
              {...{ webkitdirectory: true }}
              onChange={(event) => {
                const input = event.currentTarget;
                if (input.files?.length) start(pickedFromInput(input.files));
                input.value = "";
              }}
            />
          </Field>
        </div>
      </div>
      {note ? <p role="status">{note}</p> : null}
      {uploads.batches.length ? (
        <div class="upload-progress">
          <label for="upload-progress-bar">Upload progress</label> <progress id="upload-progress-bar" max={100} value={percent} />{" "}
          <span data-testid="upload-percent" aria-live="polite">
            {percent}%{busy ? "" : failed ? `, ${failed} batch${failed > 1 ? "es" : ""} failed` : ", done"}
          </span>
          <ol class="batches">
            {uploads.batches.map((b, i) => (
              <li key={i} class={`batch batch-${b.state}`}>
                <span>
                  {b.batch.kind === "zip"
                    ? `${b.batch.files[0]!.name} (zip)`
                    : `${b.batch.files.length} file${b.batch.files.length > 1 ? "s" : ""}`}{" "}
                  into <code>{b.batch.target || "/"}</code>, {formatBytes(b.batch.bytes)}:{" "}
                  {b.state === "done"
                    ? `stored ${b.stored}`
                    : b.state === "failed"
                      ? "failed"
                      : b.state === "sending"
                        ? "sending…"
                        : "waiting"}
                </span>
                {b.state === "failed" ? (
                  <>
                    <button type="button" onClick={() => uploads.retry(i)}>
                      Retry batch {i + 1}
                    </button>
                    <ErrorNote error={b.error} />
                  </>
                ) : null}
              </li>
            ))}
          </ol>
          {busy ? null : (
            <button type="button" onClick={uploads.clear}>
              Clear finished
            </button>
          )}
        </div>
      ) : null}
    </Panel>
  );
}

/** One image as a thumbnail with its caption, as text. */
function Thumbnail({
  path,
  file,
  mayWrite,
  onDeleted,
}: {
  path: string;
  file: ListedFile;
  mayWrite: boolean;
  onDeleted: () => Promise<void>;
}) {
  const full = joinPath(path, file.name);
  return (
    <li class="thumb">
      <figure>
        {file.size <= THUMBNAIL_MAX_BYTES ? (
          <a href={fileUrl(full, file.sha256)} target="_blank" rel="noopener">
            <img src={fileUrl(full, file.sha256)} alt={file.name} loading="lazy" decoding="async" />
          </a>
        ) : (
          <a href={fileUrl(full)} target="_blank" rel="noopener" class="thumb-large">
            {file.name}: {formatBytes(file.size)}, open it
          </a>
        )}
        <figcaption>
          <span class="thumb-name">{file.name}</span>
          <span class={file.caption ? "thumb-caption" : "thumb-caption muted"}>{file.caption ?? "no caption file"}</span>
        </figcaption>
      </figure>
      {mayWrite ? <DeleteButton path={full} label={file.name} onDeleted={onDeleted} /> : null}
    </li>
  );
}

function DeleteButton({
  path,
  label,
  folder = false,
  onDeleted,
}: {
  path: string;
  label: string;
  folder?: boolean;
  onDeleted: () => Promise<void>;
}) {
  const remove = useAction(() => call(endpoints.datasetDelete, { query: { path } }), onDeleted);
  return (
    <ConfirmButton
      label="Delete"
      name={`Delete ${label}`}
      question={folder ? `Delete the folder ${label} and everything in it?` : `Delete ${label}?`}
      confirmLabel="Yes, delete"
      onConfirm={remove.run}
      busy={remove.busy}
      error={remove.error}
    />
  );
}

/** What a folder holds: its folders, its images as thumbnails with captions, its other files. */
function Contents({ path, listing, mayWrite, reload }: { path: string; listing: Listing; mayWrite: boolean; reload: () => Promise<void> }) {
  const images = listing.files.filter((f) => IMAGE.test(f.name));
  const others = listing.files.filter((f) => !IMAGE.test(f.name));
  if (!listing.folders.length && !listing.files.length) return <p class="muted">This folder is empty.</p>;
  return (
    <>
      {listing.folders.length ? (
        <ul class="dataset-folders" aria-label="Folders">
          {listing.folders.map((name) => (
            <li key={name}>
              <a href={href("datasets", ...path.split("/").filter(Boolean), name)}>{name}/</a>
              {mayWrite ? <DeleteButton path={joinPath(path, name)} label={`${name}/`} folder onDeleted={reload} /> : null}
            </li>
          ))}
        </ul>
      ) : null}
      {images.length ? (
        <ul class="thumbs" aria-label="Images">
          {images.map((file) => (
            <Thumbnail key={file.name} path={path} file={file} mayWrite={mayWrite} onDeleted={reload} />
          ))}
        </ul>
      ) : null}
      {others.length ? (
        <div class="table-wrap">
          <table>
            <caption class="muted">Other files</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Size</th>
                <th scope="col">Uploaded</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {others.map((file) => (
                <tr key={file.name}>
                  <th scope="row">
                    <a href={fileUrl(joinPath(path, file.name))} target="_blank" rel="noopener">
                      {file.name}
                    </a>
                  </th>
                  <td>{formatBytes(file.size)}</td>
                  <td>{formatTime(file.uploaded)}</td>
                  <td>{mayWrite ? <DeleteButton path={joinPath(path, file.name)} label={file.name} onDeleted={reload} /> : "-"}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : null}
    </>
  );
}

/** Datasets: a folder's contents a page at a time, its owner's quota, and (where allowed) upload, new folders and delete. */
export function DatasetsView({ args }: ViewProps) {
  const path = args.join("/");
  const pages = useCursorPages(path);
  const listing = useLoad(
    () => call(endpoints.datasetList, { query: { path, limit: PAGE_SIZE, captions: "true", cursor: pages.cursor } }),
    [path, pages.cursor],
  );
  const usage = useLoad(() => call(endpoints.datasetUsage, { query: { path } }), [path]);
  const reload = async () => {
    await Promise.all([listing.reload(), usage.reload()]);
  };
  const createFolder = useAction(
    (name: string) => createDatasetFolder(path, name),
    (created) => navigate(href("datasets", ...created.path.split("/"))),
  );
  const mayWrite = usage.data?.may_write ?? false;
  // A researcher may always make a folder of their own at the root, and upload a folder there.
  const mayAdd = can("researcher") && (path === "" || mayWrite);
  const segments = args;
  return (
    <Page title="Datasets">
      <Breadcrumbs segments={segments} />
      <ErrorNote error={usage.error} />
      {usage.data ? <QuotaUse usage={usage.data} /> : null}
      {mayAdd ? (
        <>
          <UploadPanel path={path} onStored={reload} />
          <Panel title="New folder">
            <form
              class="row"
              onSubmit={async (event) => {
                event.preventDefault();
                const form = event.currentTarget;
                if (await createFolder.run(formValues(form).folder_name ?? "")) form.reset();
              }}
            >
              <Field label="Folder name" hint={`Inside ${path || "the datasets root"}`}>
                <input name="folder_name" required maxLength={255} autoComplete="off" />
              </Field>
              <button type="submit" disabled={createFolder.busy}>
                Create folder
              </button>
            </form>
            <ErrorNote error={createFolder.error} />
          </Panel>
        </>
      ) : null}
      <Panel title={path ? `Contents of ${path}` : "Contents"} id="dataset-contents">
        <ErrorNote error={listing.error} />
        {listing.data ? (
          <Contents path={path} listing={listing.data} mayWrite={mayWrite && can("researcher")} reload={reload} />
        ) : listing.error ? null : (
          <p aria-busy="true">Loading…</p>
        )}
        <div class="row pager">
          <button type="button" disabled={pages.index === 0} onClick={pages.first}>
            First page
          </button>
          <button type="button" disabled={pages.index === 0} onClick={pages.back}>
            Previous page
          </button>
          <button type="button" disabled={!listing.data?.next_cursor} onClick={() => pages.forward(listing.data!.next_cursor!)}>
            Next page
          </button>
          <span class="muted">Page {pages.index + 1}</span>
        </div>
      </Panel>
    </Page>
  );
}
