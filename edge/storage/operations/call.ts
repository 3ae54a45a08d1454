import type { Database } from "../../db/client";
import type { Access } from "../access";
import type { StorageBucket } from "../../bucket";
import type { Payload } from "../upload-body";

/** What every S3 operation is given: the request, the database, and who calls. */
export interface ServiceCall {
  request: Request;
  url: URL;
  db: Database;
  access: Access;
}

/** An operation on a job's bucket the caller may reach. */
export interface BucketCall extends ServiceCall {
  bucket: StorageBucket;
  /** The bucket's name: the job's id. */
  name: string;
  /** Where the job's directory lies in R2 (`<outputRoot>/<name>/`). */
  outputRoot: string;
}

/** An operation on one object of a job's bucket. */
export interface ObjectCall extends BucketCall {
  /** The object's key as the client names it. */
  key: string;
  /** The object's key in R2. */
  storedKey: string;
  /** How the request's body is signed. */
  payload: Payload;
}
