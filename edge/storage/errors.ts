/**
 * The S3 error codes the storage endpoint answers with, and their HTTP statuses as S3 gives them.
 * S3 clients branch on `<Code>` (boto3 retries `RequestTimeTooSkewed` after correcting its clock,
 * the AWS CLI prints the code), so the codes are S3's own, not this service's `{ detail, code }`.
 */
export const S3_ERROR_STATUS = {
  AccessDenied: 403,
  // Ceph RGW's answer when a quota is full (S3 has no quotas): the job's storage quota (quota.ts).
  QuotaExceeded: 403,
  InvalidAccessKeyId: 403,
  SignatureDoesNotMatch: 403,
  RequestTimeTooSkewed: 403,
  ExpiredToken: 400,
  AuthorizationHeaderMalformed: 400,
  AuthorizationQueryParametersError: 400,
  InvalidRequest: 400,
  InvalidArgument: 400,
  IncompleteBody: 400,
  BadDigest: 400,
  XAmzContentSHA256Mismatch: 400,
  MalformedTrailerError: 400,
  MalformedXML: 400,
  InvalidPartOrder: 400,
  InvalidPart: 400,
  MaxMessageLengthExceeded: 400,
  NoSuchKey: 404,
  NoSuchUpload: 404,
  NoSuchBucket: 404,
  KeyTooLongError: 400,
  EntityTooLarge: 400,
  MissingContentLength: 411,
  InvalidRange: 416,
  MethodNotAllowed: 405,
  // S3 itself answers SlowDown with 503; the rate limiter's refusals are 429. S3 clients
  // go by the code: boto3, the AWS CLI and the SDKs back off and retry a SlowDown.
  SlowDown: 429,
  InternalError: 500,
  NotImplemented: 501,
} as const;

export type S3ErrorCode = keyof typeof S3_ERROR_STATUS;

/**
 * One S3 error: its code, a message that says what to change, and the status S3 uses for it.
 * Signature checks return it as a value (the caller decides what to log); body decoders error
 * their stream with it, so whoever reads the stream (an R2 put) fails with it.
 *
 * @example
 * const error = new S3Error("BadDigest", "The CRC32 you specified did not match the calculated checksum.");
 * error.status; // 400
 */
export class S3Error extends Error {
  readonly status: (typeof S3_ERROR_STATUS)[S3ErrorCode];

  constructor(
    readonly code: S3ErrorCode,
    message: string,
  ) {
    super(message);
    this.name = "S3Error";
    this.status = S3_ERROR_STATUS[code];
  }
}

/** The errors a signature check can give: a subset of S3Error by code. */
export type S3AuthError = S3Error & {
  code:
    | "AccessDenied"
    | "InvalidAccessKeyId"
    | "SignatureDoesNotMatch"
    | "RequestTimeTooSkewed"
    | "ExpiredToken"
    | "AuthorizationHeaderMalformed"
    | "AuthorizationQueryParametersError"
    | "InvalidRequest"
    | "InvalidArgument";
};

/**
 * The S3 code for an error the service raised outside the endpoint's own checks (a middleware's
 * ApiError, an unexpected failure) on a storage path, so S3 clients can act on it: a rate-limit
 * refusal is SlowDown, which they back off from and retry.
 *
 * @example
 * s3CodeForStatus(429); // "SlowDown"
 */
export function s3CodeForStatus(status: number): S3ErrorCode {
  if (status === 429) return "SlowDown";
  if (status === 401 || status === 403) return "AccessDenied";
  if (status === 413) return "EntityTooLarge";
  if (status >= 500) return "InternalError";
  return "InvalidRequest";
}
