import type { FakeReplicate } from "../fakes/fake-replicate";

/**
 * The hosted provider's settings for a stack that uses the fake Replicate
 * (PUT /api/cloud/providers/replicate): its address (on loopback, so a private target an admin
 * allows explicitly), a trainer model, a destination model the fake's account "acme" owns, its
 * webhook secret and the built-in storage endpoint. `overrides` replace or add fields.
 *
 * @example
 * await call("PUT", "/api/cloud/providers/replicate", admin.key, fakeReplicateSettings(fake, { http_timeout: 2 }));
 */
export function fakeReplicateSettings(fake: FakeReplicate, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    api_base_url: fake.url,
    allow_private_targets: true,
    training_model: "acme/simpletuner:0123456789abcdef",
    training_destination: "acme/faces",
    webhook_secret: fake.webhookSecret,
    s3_endpoint_enabled: true,
    ...overrides,
  };
}
