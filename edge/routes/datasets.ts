import { createRoute, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import type { AppEnv } from "../app-env";
import { ownerScope } from "../../shared/levels";
import {
  createFolder,
  deleteDataset,
  listDatasets,
  MAX_UPLOAD_BYTES,
  uploadFiles,
  uploadZip,
  type Reserve,
  type WriteCheck,
} from "../datasets/datasets";
import { authorizeFolderWrite, getFolderSharing, setFolderSharing } from "../datasets/folders";
import { checkName } from "../datasets/paths";
import { readDatasetFile, withCaptions } from "../datasets/file-read";
import { folderUsage } from "../datasets/usage";
import { attachmentDisposition, SAFE_OBJECT_HEADERS } from "../storage/download-headers";
import { datasetQuota, releaseDeleted, reserveDatasetWrites } from "../datasets/quota";
import { ApiError } from "../errors";
import { principalOf } from "../middleware/authorize";
import { continueFilters, decodeCursor, encodeCursor } from "../paging";
import { getSetting } from "../settings-store";
import { createRouter } from "../router";
import { patchSetting } from "./setting-patch";
import { auditLater } from "../audit/trail";
import {
  DATASET_QUOTA_DEFAULTS,
  DatasetCloudSharing,
  DatasetCloudSharingUpdate,
  DatasetDeleted,
  DatasetDeleteQuery,
  DatasetFileQuery,
  DatasetFolderParam,
  DatasetListing,
  DatasetListingQuery,
  DatasetQuota,
  DatasetQuotaUpdate,
  DatasetUsage,
  DatasetUsageQuery,
  DatasetUpload,
} from "../../shared/schemas/datasets";
import { error, json } from "./openapi";

/** Datasets: folders and uploads into R2 under the datasets root. */
export const datasetsRoutes = createRouter();

const tags = ["Datasets"];
const formOf = (fields: Record<string, z.ZodType>) => ({
  required: true,
  content: { "multipart/form-data": { schema: z.object(fields) } },
});
const uploadErrors = {
  401: error("No valid credential"),
  403: error("Below researcher, or another user's folder (folder_not_yours): only its creator, leads and admins change its files"),
  413: error("Too large, or past the folder owner's dataset quota (dataset_quota_exceeded, saying the quota and the usage)"),
  415: error("A file type that is not allowed"),
  422: error("A bad path or name (the answer names it); nothing was written"),
};

/** The form, after refusing a body over the limit before reading it. */
async function form(c: Context<AppEnv>): Promise<Record<string, unknown>> {
  const length = Number(c.req.header("content-length") ?? 0);
  if (length > MAX_UPLOAD_BYTES)
    throw new ApiError(
      413,
      "upload_too_large",
      `Uploads are at most ${MAX_UPLOAD_BYTES} bytes per request; this one is ${length}. Split it into several uploads`,
    );
  const type = c.req.header("content-type") ?? "";
  if (!type.startsWith("multipart/form-data") && !type.startsWith("application/x-www-form-urlencoded"))
    throw new ApiError(415, "unsupported_media_type", "Send a multipart/form-data form");
  return c.req.parseBody({ all: true });
}
/** Who may change the folder a request writes into: its creator, leads and admins (datasets/folders.ts). */
function writeCheck(c: Context<AppEnv>): WriteCheck {
  const { user } = principalOf(c);
  return (segments) => authorizeFolderWrite(c.get("db"), c.env.STORAGE, segments, { userId: user.id, ownerScope: ownerScope(user) });
}
/** What a request adds, reserved in its folders' owners' quota (datasets/quota.ts). */
function reserve(c: Context<AppEnv>): Reserve {
  return async (writes) => reserveDatasetWrites(c.get("db"), c.env.STORAGE, await datasetQuota(c.get("db")), writes);
}
const text = (value: unknown) => (typeof value === "string" ? value : Array.isArray(value) && typeof value[0] === "string" ? value[0] : "");
const filesIn = (value: unknown): File[] =>
  (Array.isArray(value) ? value : value === undefined ? [] : [value]).filter(
    (v): v is File => typeof v === "object" && v !== null && "arrayBuffer" in v,
  );

datasetsRoutes.openapi(
  createRoute({
    method: "post",
    path: "/api/datasets/folders",
    tags,
    summary: "Create a folder under the datasets root",
    description:
      "`folder_name` (one path segment) under `parent_path` (empty: the datasets root). 409 when it exists. A new top-level folder belongs to its creator: only they, leads and admins change files under it (else 403 `folder_not_yours`).",
    request: {
      body: formOf({
        parent_path: z.string().optional().openapi({ description: "Relative to the datasets root; empty for the root" }),
        folder_name: z.string().optional(),
      }),
    },
    responses: {
      201: json(z.object({ success: z.literal(true), path: z.string() }), "Created"),
      401: error("No valid credential"),
      403: error("Below researcher, or inside another user's folder (folder_not_yours)"),
      409: error("Exists"),
      413: error("Past the folder owner's dataset quota (dataset_quota_exceeded): a folder counts as one file"),
      422: error("A bad path or name"),
    },
  }),
  async (c) => {
    const f = await form(c);
    const path = await createFolder(c.env.STORAGE, text(f.parent_path), text(f.folder_name), writeCheck(c), reserve(c));
    c.get("log").info("dataset folder created", { path, by: principalOf(c).user.id });
    return c.json({ success: true as const, path }, 201);
  },
);

datasetsRoutes.openapi(
  createRoute({
    method: "post",
    path: "/api/datasets/upload",
    tags,
    summary: "Upload images and caption/metadata files (.txt, .jsonl, .csv) into a folder",
    description: `Field files[] (or files), repeated; target_path relative to the datasets root. At most ${MAX_UPLOAD_BYTES} bytes per request. Every name is checked before anything is written.`,
    request: {
      body: formOf({
        target_path: z.string().optional(),
        "files[]": z.any().openapi({ type: "array", items: { type: "string", format: "binary" } }),
      }),
    },
    responses: { 201: json(DatasetUpload, "Stored"), ...uploadErrors },
  }),
  async (c) => {
    const f = await form(c);
    const files = [...filesIn(f["files[]"]), ...filesIn(f.files)];
    const incoming = await Promise.all(files.map(async (file) => ({ name: file.name, bytes: new Uint8Array(await file.arrayBuffer()) })));
    const target = text(f.target_path);
    const stored = await uploadFiles(c.env.STORAGE, target, incoming, writeCheck(c), reserve(c));
    c.get("log").info("dataset files uploaded", { target_path: target, files: stored.length, by: principalOf(c).user.id });
    return c.json({ success: true as const, target_path: target, files: stored, skipped: [] }, 201);
  },
);

datasetsRoutes.openapi(
  createRoute({
    method: "post",
    path: "/api/datasets/upload/zip",
    tags,
    summary: "Upload a zip; it is extracted into target_path on the server",
    description: `The zip's folders are kept under target_path. Refused with nothing written, naming the entry: a path leaving target_path (zip-slip), a symbolic link, a file type that is not allowed. At most ${MAX_UPLOAD_BYTES} bytes uploaded and 1 GiB extracted.`,
    request: { body: formOf({ target_path: z.string().optional(), file: z.any().openapi({ type: "string", format: "binary" }) }) },
    responses: { 201: json(DatasetUpload, "Extracted"), ...uploadErrors },
  }),
  async (c) => {
    const f = await form(c);
    const [file] = filesIn(f.file);
    if (!file) throw new ApiError(422, "no_file", "Send the zip in the file field", [{ path: "form.file", message: "required" }]);
    const target = text(f.target_path);
    const { files, skipped } = await uploadZip(c.env.STORAGE, target, new Uint8Array(await file.arrayBuffer()), writeCheck(c), reserve(c));
    c.get("log").info("dataset zip extracted", { target_path: target, files: files.length, by: principalOf(c).user.id });
    return c.json({ success: true as const, target_path: target, files, skipped }, 201);
  },
);

datasetsRoutes.openapi(
  createRoute({
    method: "get",
    path: "/api/datasets",
    tags,
    summary: "List the folders and files directly under a dataset path, a page at a time",
    description:
      "`path` relative to the datasets root (empty: the root). Folders and files together in key order, at most `limit` per page (default 500, at most 1000); `next_cursor` continues the walk (it keeps its path), null on the last page. Files with their size, SHA-256 and upload time; with `captions=true` each image also carries its `.txt` sidecar's text (`caption`, null when none), for a page of thumbnails. Reading is open to every level.",
    request: { query: DatasetListingQuery },
    responses: {
      200: json(DatasetListing, "A page of the listing"),
      401: error("No valid credential"),
      422: error("A bad path, or a cursor this listing did not make (invalid_cursor)"),
    },
  }),
  async (c) => {
    const query = c.req.valid("query");
    const at = query.cursor === undefined ? null : decodeCursor("datasets", query.cursor);
    const path = at ? continueFilters({ path: at.path }, { path: query.path }).path : (query.path ?? "");
    const page = await listDatasets(c.env.STORAGE, path, { limit: query.limit, after: at?.after ?? null });
    const next_cursor = page.next === null ? null : encodeCursor("datasets", { path: page.path, after: page.next });
    const files = query.captions === "true" ? await withCaptions(c.env.STORAGE, page.path, page.files) : page.files;
    return c.json({ path: page.path, folders: page.folders, files, next_cursor }, 200);
  },
);

datasetsRoutes.openapi(
  createRoute({
    method: "get",
    path: "/api/datasets/file",
    tags,
    summary: "Read one dataset file (a thumbnail, a caption)",
    description:
      "`path` relative to the datasets root. Open to every level, as the listing is. Served by its name's extension, never by its bytes: PNG, JPEG, WebP, GIF and BMP images as their image type and captions and metadata (.txt, .csv, .jsonl) as `text/plain; charset=utf-8`, both inline; anything else (TIFF, a file stored before the upload rules) as `application/octet-stream` with `Content-Disposition: attachment`. Every answer carries `X-Content-Type-Options: nosniff` and `Content-Security-Policy: sandbox; default-src 'none'`, so no stored file runs as a page of this origin; `ETag` is the file's SHA-256 when it has one.",
    request: { query: DatasetFileQuery },
    responses: {
      200: { description: "The file's bytes" },
      304: { description: "The copy the client holds (If-None-Match) is current" },
      401: error("No valid credential"),
      404: error("No file at that path (a folder is none)"),
      422: error("A bad path (.., a leading /, a backslash, a control character)"),
    },
  }),
  async (c) => {
    const file = await readDatasetFile(c.env.STORAGE, c.req.valid("query").path);
    const headers: Record<string, string> = {
      ...SAFE_OBJECT_HEADERS,
      "content-type": file.contentType,
      "content-length": String(file.size),
      "cache-control": "private, max-age=300",
      "content-disposition": file.inline
        ? `inline; ${attachmentDisposition(file.path).slice("attachment; ".length)}`
        : attachmentDisposition(file.path),
    };
    if (file.sha256) {
      headers.etag = `"${file.sha256}"`;
      if (c.req.header("if-none-match") === headers.etag) {
        await file.body.cancel();
        delete headers["content-length"];
        return c.body(null, 304, headers) as never;
      }
    }
    return c.body(file.body, 200, headers) as never;
  },
);

datasetsRoutes.openapi(
  createRoute({
    method: "get",
    path: "/api/datasets/usage",
    tags,
    summary: "The dataset quota use of a folder's owner, and whether you may change files there",
    description:
      "`path` (empty: the datasets root) names a top-level folder through its first segment: its owner (the folder's creator; null for nobody's), what all their folders hold against the quota in force, and `may_write`: whether the caller may upload into or delete under it (its owner, leads and admins; a folder that does not exist yet, any researcher). At the root: the caller's own use. Open to every level, as the listing is.",
    request: { query: DatasetUsageQuery },
    responses: {
      200: json(DatasetUsage, "The owner's use and the caller's right to write"),
      401: error("No valid credential"),
      422: error("A bad path"),
    },
  }),
  async (c) => {
    const { user } = principalOf(c);
    const usage = await folderUsage(c.get("db"), c.env.STORAGE, c.req.valid("query").path ?? "", {
      userId: user.id,
      username: user.username,
      level: user.level,
    });
    return c.json(usage, 200);
  },
);

datasetsRoutes.openapi(
  createRoute({
    method: "delete",
    path: "/api/datasets",
    tags,
    summary: "Delete a dataset file, or a folder with everything under it",
    description:
      "`path` relative to the datasets root (not the root itself). Only the folder's owner, leads and admins (else 403 `folder_not_yours`); what is deleted is given back to the owner's dataset quota. A job that already fetched the files keeps its cached copy.",
    request: { query: DatasetDeleteQuery },
    responses: {
      200: json(DatasetDeleted, "Deleted"),
      401: error("No valid credential"),
      403: error("Below researcher, or another user's folder (folder_not_yours)"),
      404: error("Nothing at that path"),
      422: error("A bad path, or the root"),
    },
  }),
  async (c) => {
    const db = c.get("db");
    const deleted = await deleteDataset(c.env.STORAGE, c.req.valid("query").path, writeCheck(c), (objects) => releaseDeleted(db, objects));
    c.get("log").info("dataset deleted", { path: deleted.path, files: deleted.files, bytes: deleted.bytes, by: principalOf(c).user.id });
    return c.json({ success: true as const, path: deleted.path, deleted_files: deleted.files, deleted_bytes: deleted.bytes }, 200);
  },
);

datasetsRoutes.openapi(
  createRoute({
    method: "get",
    path: "/api/admin/dataset-quota",
    tags,
    summary: "What one user's dataset folders may hold (admin)",
    description: `\`max_bytes\` (default 50 GiB) and \`max_files\` (default ${DATASET_QUOTA_DEFAULTS.max_files}) per owner of top-level folders, over everything under the folders they own; each folder counts as one file.`,
    responses: { 200: json(DatasetQuota, "The quota in force"), 401: error("No valid credential"), 403: error("Not an admin") },
  }),
  async (c) => c.json(await getSetting(c.get("db"), "dataset_quota"), 200),
);

datasetsRoutes.openapi(
  createRoute({
    method: "put",
    path: "/api/admin/dataset-quota",
    tags,
    summary: "Set what one user's dataset folders may hold (admin)",
    description:
      "Either field or both; the other keeps its value. An upload or folder that would pass it is refused with 413 `dataset_quota_exceeded` and writes nothing; files already stored stay.",
    request: { body: { required: true, content: { "application/json": { schema: DatasetQuotaUpdate } } } },
    responses: {
      200: json(DatasetQuota, "The quota now in force"),
      401: error("No valid credential"),
      403: error("Not an admin"),
      422: error("Not a whole number of bytes or files"),
    },
  }),
  async (c) => c.json(await patchSetting(c, "dataset_quota", c.req.valid("json"), "dataset_quota_changed", "dataset quota"), 200),
);

/** The top-level folder a cloud-sharing route names (422 for anything but one plain segment). */
function folderName(name: string): string {
  const problem = checkName(name);
  if (problem)
    throw new ApiError(422, "invalid_path", `Folder ${JSON.stringify(name)} ${problem}: name one top-level folder`, [
      { path: "path.name", message: problem },
    ]);
  return name;
}

const SHARING_RULE =
  "A cloud submission (POST /api/cloud/jobs/submit) packages a top-level dataset folder and sends it to the provider only when the submitter owns it, is an admin, or the folder's `allow_cloud` is true; otherwise it is refused with 403 `dataset_not_yours` naming the folder and its owner, and nothing is uploaded. `allow_cloud` is false for every folder until its owner or an admin sets it. It is checked when a job is submitted: setting it back to false refuses later submissions, not jobs already accepted.";

datasetsRoutes.openapi(
  createRoute({
    method: "get",
    path: "/api/datasets/folders/{name}/cloud-sharing",
    tags,
    summary: "Whether other users' cloud jobs may send a dataset folder to a provider",
    description: `The folder's owner, \`allow_cloud\` and who set it last. ${SHARING_RULE}`,
    request: { params: DatasetFolderParam },
    responses: {
      200: json(DatasetCloudSharing, "The folder's consent"),
      401: error("No valid credential"),
      404: error("No such top-level folder"),
      422: error("Not a single folder name"),
    },
  }),
  async (c) => {
    const name = folderName(c.req.valid("param").name);
    return c.json(await getFolderSharing(c.get("db"), c.env.STORAGE, name), 200);
  },
);

datasetsRoutes.openapi(
  createRoute({
    method: "put",
    path: "/api/datasets/folders/{name}/cloud-sharing",
    tags,
    summary: "Let other users' cloud jobs send a dataset folder to a provider, or stop them",
    description: `\`{"allow_cloud": true}\` lets every researcher's cloud submission package this top-level folder; \`false\` takes that back. Only the folder's owner and admins (else 403 \`folder_not_yours\`; leads too: sending files to a third party is the owner's choice); a folder from before folders had owners only by an admin. ${SHARING_RULE}`,
    request: {
      params: DatasetFolderParam,
      body: { required: true, content: { "application/json": { schema: DatasetCloudSharingUpdate } } },
    },
    responses: {
      200: json(DatasetCloudSharing, "The consent now in force"),
      401: error("No valid credential"),
      403: error("Below researcher, or neither the folder's owner nor an admin (folder_not_yours)"),
      404: error("No such top-level folder"),
      422: error("Not a single folder name, or a body that is not {allow_cloud: boolean}"),
    },
  }),
  async (c) => {
    const name = folderName(c.req.valid("param").name);
    const { user } = principalOf(c);
    const { allow_cloud } = c.req.valid("json");
    const sharing = await setFolderSharing(c.get("db"), c.env.STORAGE, name, allow_cloud, {
      userId: user.id,
      admin: user.level === "admin",
    });
    // Who let a folder go to a third party is the audit trail's business, not only the log's.
    auditLater(c, { event_type: "dataset_cloud_sharing_changed", target: `datasets/${name}`, details: { allow_cloud } });
    c.get("log").info("dataset folder cloud sharing set", { folder: name, allow_cloud, by: user.id });
    return c.json(sharing, 200);
  },
);
