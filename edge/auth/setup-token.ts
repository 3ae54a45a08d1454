import { ApiError } from "../errors";
import { constantTimeEqual } from "./crypto";

/*
 * The first admin of a service reachable beyond this machine is created only with the one-time
 * setup token (README "First run"): otherwise whoever finds a freshly started service first
 * would own it. The token is SETUP_TOKEN (a Worker secret when deployed); `npm start` makes a
 * random one when it is unset and prints it while setup is needed. A request from a genuine
 * loopback peer of the local host needs none: whoever can run commands on the machine could
 * read the printed token anyway.
 */

export interface SetupTokenCheck {
  environment: "development" | "production";
  /** SETUP_TOKEN as configured (undefined: unset). */
  expected: string | undefined;
  /** The request's socket peer is loopback and no proxy forwarded it. */
  fromLoopback: boolean;
  /** The `setup_token` the request sent. */
  offered: string | undefined;
}

/**
 * Throws 403 unless the request may create the first admin: from a genuine loopback peer in
 * development, or with the right setup token. A deployed Worker without SETUP_TOKEN refuses
 * every request and says to set the secret.
 *
 * @example
 * requireSetupToken({ environment: "production", expected: "s3cret", fromLoopback: false, offered: "s3cret" }); // passes
 */
export function requireSetupToken({ environment, expected, fromLoopback, offered }: SetupTokenCheck): void {
  if (environment === "development" && fromLoopback) return;
  if (expected === undefined) {
    throw new ApiError(
      403,
      "setup_token_unset",
      "Creating the first admin needs a setup token, and this service has none: set the SETUP_TOKEN secret (wrangler secret put SETUP_TOKEN; locally the SETUP_TOKEN variable) and send it as setup_token",
    );
  }
  if (offered === undefined || offered === "") {
    throw new ApiError(
      403,
      "setup_token_required",
      "Creating the first admin from another machine needs the one-time setup token: send it as setup_token. npm start prints it at start; deployed, it is the SETUP_TOKEN secret",
    );
  }
  if (!constantTimeEqual(offered, expected)) {
    throw new ApiError(
      403,
      "invalid_setup_token",
      "The setup token is wrong: use the one npm start printed at start (or the SETUP_TOKEN variable or secret)",
    );
  }
}
