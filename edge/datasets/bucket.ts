/** The R2 bucket (binding STORAGE), as far as this code uses it. */
export interface Bucket {
  put(
    key: string,
    value: ArrayBuffer | Uint8Array | string,
    options?: { httpMetadata?: { contentType?: string }; customMetadata?: Record<string, string>; sha256?: string },
  ): Promise<unknown>;
  head(key: string): Promise<{ key: string; size: number } | null>;
  delete(keys: string | string[]): Promise<void>;
  get(key: string): Promise<{
    body: ReadableStream;
    size: number;
    customMetadata?: Record<string, string>;
    httpMetadata?: { contentType?: string };
  } | null>;
  list(options: {
    prefix?: string;
    delimiter?: string;
    cursor?: string;
    startAfter?: string;
    limit?: number;
    include?: ("customMetadata" | "httpMetadata")[];
  }): Promise<{
    objects: { key: string; size: number; uploaded: Date; customMetadata?: Record<string, string> }[];
    delimitedPrefixes: string[];
    truncated: boolean;
    cursor?: string;
  }>;
}
