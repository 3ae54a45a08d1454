import type { Database } from "../db/client";
import { lookupStorageCredentials, providerJobDirectory, storageDirectories } from "./credentials";
import { S3Error } from "./errors";
import { chunkSigner, parseSigV4, verifySigV4 } from "./sigv4";
import type { Payload } from "./upload-body";

/*
 * Who calls the storage endpoint, and which job directories they reach. Requests are SigV4-signed
 * with a job's credentials, which reach that job's bucket only and only while the job is active,
 * or with a provider's manual pair (any active job of that provider); users read with their
 * session or API key. A job's bucket is its job id; its objects live in R2 under
 * `<output root>/<job id>/<key>`, the output root fixed when the job's first credentials were
 * issued (credentials.ts).
 */

/**
 * A user who called with a session or API key instead of a job's signature (the route identifies
 * them): they read the results of the jobs they may act on, `ownerId` null meaning everyone's
 * (leads and admins), else their own.
 */
export interface StorageUser {
  username: string;
  ownerId: number | null;
}

export type Access =
  | { kind: "job"; jobId: string; outputRoot: string; payload: Payload }
  /** A provider's manually configured credentials: any active job of that provider. */
  | { kind: "provider"; provider: string; payload: Payload }
  | { kind: "user"; owner: string; ownerId: number | null };

const refusal = (inactive: { code: "ExpiredToken" | "AccessDenied"; reason: string }) =>
  new S3Error(
    inactive.code,
    inactive.code === "ExpiredToken" ? `The provided token has expired: ${inactive.reason}.` : `Access Denied: ${inactive.reason}.`,
  );

/**
 * Who calls: the user the route identified, else whose credentials signed `request` (a job's, or
 * a provider's manual pair), after checking the signature. A user only reads.
 *
 * @example
 * const access = await accessOf(request, db, null); // { kind: "job", jobId, outputRoot, payload }
 */
export async function accessOf(request: Request, db: Database, user: StorageUser | null): Promise<Access> {
  if (user) return { kind: "user", owner: user.username, ownerId: user.ownerId };
  const parsed = parseSigV4(request);
  if (parsed instanceof S3Error) throw parsed;
  const credentials = await lookupStorageCredentials(db, parsed.accessKeyId);
  if (credentials === null) throw new S3Error("InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records.");
  if (!credentials.active) throw refusal(credentials);
  const refused = await verifySigV4(request, parsed, credentials.secret, new Date());
  if (refused) throw refused;
  const signer = parsed.payloadMode.startsWith("streaming-signed") ? chunkSigner(parsed, credentials.secret) : undefined;
  const payload = { mode: parsed.payloadMode, hash: parsed.payloadHash, signer };
  if (credentials.kind === "provider") return { kind: "provider", provider: credentials.provider, payload };
  return { kind: "job", jobId: credentials.jobId, outputRoot: credentials.outputRoot, payload };
}

/** With a session or API key the endpoint is read-only: throws AccessDenied for a user's write. */
export function assertMayUse(access: Access, method: string): void {
  if (access.kind === "user" && method !== "GET" && method !== "HEAD")
    throw new S3Error(
      "AccessDenied",
      "With a session or API key the storage endpoint is read-only: jobs upload with their own credentials.",
    );
}

/**
 * The output root of job bucket `name`, once `access` may reach it: a job its own bucket, a
 * provider's pair the buckets of its active jobs, a user the jobs they may act on.
 *
 * @example
 * const outputRoot = await bucketRoot(db, access, "job-1"); // objects under `${outputRoot}/job-1/`
 */
export async function bucketRoot(db: Database, access: Access, name: string): Promise<string> {
  if (access.kind === "job") {
    if (name !== access.jobId)
      throw new S3Error("AccessDenied", `These credentials belong to job ${access.jobId}: bucket ${name} is not theirs.`);
    return access.outputRoot;
  }
  if (access.kind === "provider") {
    const directory = await providerJobDirectory(db, access.provider, name);
    if ("active" in directory) throw refusal(directory);
    return directory.outputRoot;
  }
  const [directory] = await storageDirectories(db, { jobId: name });
  if (!directory) throw new S3Error("NoSuchBucket", `No job ${name} has stored anything here.`);
  if (access.ownerId !== null && directory.userId !== access.ownerId)
    throw new S3Error(
      "AccessDenied",
      `Job ${name} is not yours: with a session or API key you read your own jobs' results (leads and admins: every job's).`,
    );
  return directory.outputRoot;
}

/** The payload signing of a write: a user's call (a read) carries none. */
export const payloadOf = (access: Access): Payload =>
  access.kind === "user" ? { mode: "unsigned", hash: "UNSIGNED-PAYLOAD" } : access.payload;
