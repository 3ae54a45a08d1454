import { ApiError } from "../errors";
import type { StorageBucket } from "../bucket";
import { MAX_LISTED_CAPTION } from "../../shared/schemas/datasets";
import { targetSegments, type DatasetEntry } from "./datasets";
import { keyOf } from "./paths";

/*
 * Reading dataset files back to users (GET /api/datasets/file), so the dashboard can show
 * thumbnails and captions. What a file is served as follows its name's extension, never the
 * type it was stored with nor its bytes: raster images as their image type (shown in place),
 * caption and metadata files as plain text, anything else as a download. The route adds nosniff
 * and a CSP sandbox, so no stored byte runs as a page of the service's origin.
 */

/** Image types a browser shows in place and that cannot carry script (no SVG). */
const INLINE_IMAGES: Record<string, string> = {
  png: "image/png",
  jpg: "image/jpeg",
  jpeg: "image/jpeg",
  webp: "image/webp",
  gif: "image/gif",
  bmp: "image/bmp",
};
const TEXT = new Set(["txt", "csv", "jsonl"]);

const extensionOf = (name: string) => (name.includes(".") ? name.slice(name.lastIndexOf(".") + 1).toLowerCase() : "");

/** How a dataset file named `name` is served: its Content-Type and whether it is shown in place. */
export function servedAs(name: string): { contentType: string; inline: boolean } {
  const ext = extensionOf(name);
  if (INLINE_IMAGES[ext]) return { contentType: INLINE_IMAGES[ext], inline: true };
  if (TEXT.has(ext)) return { contentType: "text/plain; charset=utf-8", inline: true };
  return { contentType: "application/octet-stream", inline: false };
}

export interface DatasetFile {
  /** The file's path under the datasets root. */
  path: string;
  name: string;
  body: ReadableStream;
  size: number;
  sha256: string | null;
  contentType: string;
  inline: boolean;
}

/**
 * One dataset file with how it is served; 404 when there is none at `path` (a folder is none).
 *
 * @example
 * const file = await readDatasetFile(bucket, "portraits/001.png"); // file.contentType: "image/png"
 */
export async function readDatasetFile(bucket: StorageBucket, path: string): Promise<DatasetFile> {
  const segments = targetSegments("path", path, false);
  const object = await bucket.get(keyOf(segments));
  if (!object) throw new ApiError(404, "not_found", `There is no dataset file ${segments.join("/")}`);
  const name = segments[segments.length - 1]!;
  return {
    path: segments.join("/"),
    name,
    body: object.body,
    size: object.size,
    sha256: object.customMetadata?.sha256 ?? null,
    ...servedAs(name),
  };
}

/** The most bytes of a sidecar read for its caption (MAX_LISTED_CAPTION characters of UTF-8 at most). */
const CAPTION_BYTES = MAX_LISTED_CAPTION * 4;
/** How many sidecars are read at once. */
const CAPTIONS_AT_ONCE = 16;

/**
 * The listing's files with `caption` on each image: the text of its `.txt` sidecar of the same
 * stem (SimpleTuner's `textfile` strategy), cut at MAX_LISTED_CAPTION characters; null when it
 * has none. Other files are returned as they are.
 *
 * @example
 * const files = await withCaptions(bucket, "portraits", page.files); // files[0].caption: "a woman in a red coat"
 */
export async function withCaptions(
  bucket: StorageBucket,
  path: string,
  files: DatasetEntry[],
): Promise<(DatasetEntry & { caption?: string | null })[]> {
  const folder = targetSegments("path", path);
  const out: (DatasetEntry & { caption?: string | null })[] = files.map((f) => ({ ...f }));
  const images = out.filter((f) => INLINE_IMAGES[extensionOf(f.name)] !== undefined || ["tif", "tiff"].includes(extensionOf(f.name)));
  for (let i = 0; i < images.length; i += CAPTIONS_AT_ONCE) {
    await Promise.all(
      images.slice(i, i + CAPTIONS_AT_ONCE).map(async (image) => {
        const stem = image.name.slice(0, image.name.lastIndexOf("."));
        // Only the sidecar's first bytes are read: a caption file may be as large as any upload.
        const sidecar = await bucket.get(keyOf([...folder, `${stem}.txt`]), { range: { offset: 0, length: CAPTION_BYTES } });
        image.caption =
          sidecar && "body" in sidecar
            ? new TextDecoder()
                .decode(await new Response(sidecar.body).arrayBuffer())
                .slice(0, MAX_LISTED_CAPTION)
                .trim()
            : null;
      }),
    );
  }
  return out;
}
