import { createRoute, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import type { AppEnv } from "../app-env";
import { ownerScope } from "../../shared/levels";
import { createFolder, listDatasets, MAX_UPLOAD_BYTES, uploadFiles, uploadZip, type WriteCheck } from "../datasets/datasets";
import { authorizeFolderWrite } from "../datasets/folders";
import { ApiError } from "../errors";
import { principalOf } from "../middleware/authorize";
import { createRouter } from "../router";
import { error, json } from "./openapi";

/** Datasets (spec 4.4): uploads into R2 under the datasets root. */
export const datasetsRoutes = createRouter();

const tags = ["Datasets"];
const StoredFile = z.object({ name: z.string(), path: z.string(), size: z.number().int(), sha256: z.string() });
const UploadResult = z
  .object({ success: z.literal(true), target_path: z.string(), files: z.array(StoredFile), skipped: z.array(z.string()) })
  .openapi("DatasetUpload");
const formOf = (fields: Record<string, z.ZodType>) => ({
  required: true,
  content: { "multipart/form-data": { schema: z.object(fields) } },
});
const uploadErrors = {
  401: error("No valid credential"),
  403: error("Below researcher, or another user's folder (folder_not_yours): only its creator, leads and admins change its files"),
  413: error("Too large"),
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
      422: error("A bad path or name"),
    },
  }),
  async (c) => {
    const f = await form(c);
    const path = await createFolder(c.env.STORAGE, text(f.parent_path), text(f.folder_name), writeCheck(c));
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
    responses: { 201: json(UploadResult, "Stored"), ...uploadErrors },
  }),
  async (c) => {
    const f = await form(c);
    const files = [...filesIn(f["files[]"]), ...filesIn(f.files)];
    const incoming = await Promise.all(files.map(async (file) => ({ name: file.name, bytes: new Uint8Array(await file.arrayBuffer()) })));
    const target = text(f.target_path);
    const stored = await uploadFiles(c.env.STORAGE, target, incoming, writeCheck(c));
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
    responses: { 201: json(UploadResult, "Extracted"), ...uploadErrors },
  }),
  async (c) => {
    const f = await form(c);
    const [file] = filesIn(f.file);
    if (!file) throw new ApiError(422, "no_file", "Send the zip in the file field", [{ path: "form.file", message: "required" }]);
    const target = text(f.target_path);
    const { files, skipped } = await uploadZip(c.env.STORAGE, target, new Uint8Array(await file.arrayBuffer()), writeCheck(c));
    c.get("log").info("dataset zip extracted", { target_path: target, files: files.length, by: principalOf(c).user.id });
    return c.json({ success: true as const, target_path: target, files, skipped }, 201);
  },
);

datasetsRoutes.openapi(
  createRoute({
    method: "get",
    path: "/api/datasets",
    tags,
    summary: "List the folders and files directly under a dataset path",
    description:
      "`path` relative to the datasets root (empty: the root). Files with their size, SHA-256 and upload time. Reading is open to every level.",
    request: { query: z.object({ path: z.string().max(1024).default("") }) },
    responses: {
      200: json(
        z
          .object({
            path: z.string(),
            folders: z.array(z.string()),
            files: z.array(z.object({ name: z.string(), size: z.number().int(), sha256: z.string().nullable(), uploaded: z.string() })),
          })
          .openapi("DatasetListing"),
        "Listing",
      ),
      401: error("No valid credential"),
      422: error("A bad path"),
    },
  }),
  async (c) => c.json(await listDatasets(c.env.STORAGE, c.req.valid("query").path), 200),
);
