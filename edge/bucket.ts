/*
 * The R2 bucket (binding STORAGE) as far as this service uses it: the storage endpoint, the
 * datasets, cloud packaging and the upload sweep all take this one interface. It is typed here
 * rather than through the Workers types so that the Node-side checks of tests that import these
 * files need none; workerd's R2Bucket fits it.
 */

/** What an upload may say about how its object is served later (S3's Content-Type and Content-Disposition). */
export interface ObjectMetadata {
  contentType?: string;
  contentDisposition?: string;
}

/** An R2 object's description (workerd's R2Object). */
export interface StoredObject {
  key: string;
  size: number;
  etag: string;
  uploaded: Date;
  httpMetadata?: ObjectMetadata;
  customMetadata?: Record<string, string>;
}

/** An R2 object with its bytes (workerd's R2ObjectBody). */
export interface StoredObjectBody extends StoredObject {
  body: ReadableStream<Uint8Array>;
}

/** A part of a multipart upload, as R2 tags it. */
export interface UploadedPart {
  partNumber: number;
  etag: string;
}

/** An upload in progress (workerd's R2MultipartUpload). */
export interface MultipartUpload {
  uploadPart(partNumber: number, value: ReadableStream): Promise<UploadedPart>;
  abort(): Promise<void>;
  complete(parts: UploadedPart[]): Promise<StoredObject>;
}

/** One page of a listing. */
export interface ObjectListing {
  objects: StoredObject[];
  delimitedPrefixes: string[];
  truncated: boolean;
  cursor?: string;
}

export interface StorageBucket {
  put(
    key: string,
    value: ReadableStream | ArrayBuffer | Uint8Array | string,
    options?: { httpMetadata?: ObjectMetadata; customMetadata?: Record<string, string>; sha256?: string },
  ): Promise<StoredObject | null>;
  head(key: string): Promise<StoredObject | null>;
  /** The whole object; with `onlyIf`, only its description when the condition fails. */
  get(key: string): Promise<StoredObjectBody | null>;
  get(
    key: string,
    options: { range?: { offset: number; length: number }; onlyIf?: { etagMatches?: string } },
  ): Promise<StoredObject | StoredObjectBody | null>;
  delete(keys: string | string[]): Promise<void>;
  list(options: {
    prefix?: string;
    delimiter?: string;
    limit?: number;
    cursor?: string;
    startAfter?: string;
    include?: ("customMetadata" | "httpMetadata")[];
  }): Promise<ObjectListing>;
  createMultipartUpload(key: string, options?: { httpMetadata?: ObjectMetadata }): Promise<{ uploadId: string }>;
  resumeMultipartUpload(key: string, uploadId: string): MultipartUpload;
}

/**
 * The R2 key of `key` in job `bucket`'s directory under `root`.
 *
 * @example
 * objectKey("outputs", "job-1", "final/model.safetensors"); // "outputs/job-1/final/model.safetensors"
 */
export const objectKey = (root: string, bucket: string, key: string) => `${root}/${bucket}/${key}`;

// workerd's stream of a declared length.
declare const FixedLengthStream: new (length: number) => TransformStream<Uint8Array, Uint8Array>;

/**
 * A stream of exactly `length` bytes, whose readable side R2 accepts as a value (R2 needs a
 * stream's length up front); it errors when fewer or more bytes are written.
 *
 * @example
 * const { readable, writable } = fixedLengthStream(size); // bucket.put(key, readable) while writing
 */
export const fixedLengthStream = (length: number): TransformStream<Uint8Array, Uint8Array> => new FixedLengthStream(length);
