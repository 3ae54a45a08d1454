// Whose datasets a cloud job may send to the provider, and which files never go, over real HTTP:
// the real local stack against the fake Replicate. Alice's folder holds the credential files of
// every allowed type next to her dataset; Bob (a researcher) and Lena (a lead) name it in their
// dataloader. Refused (nothing stored, nothing sent to the provider) until Alice allows cloud
// sharing of the folder; an admin's submission always goes; the credential files never do.
import { fakeReplicateSettings } from "../helpers/fake-provider";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeReplicate, type FakeReplicate } from "../fakes/fake-replicate";
import { until } from "../helpers/wait";
import { createUserWithKey, setUpAdmin, startTestStack, type Reply, type TestStack } from "../helpers/stack";

const TOKEN = "r8_consenttesttoken0123456789abcdef";
const PNG = Buffer.from(
  "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8cfc0f01f0005000201a5e2b3b40000000049454e44ae426082",
  "hex",
);

/** Alice's credential files (allowed types only: the upload takes them) and the reason each is left out. */
const CREDENTIAL_FILES: [string, string][] = [
  ["credentials.csv", "credentials file (credentials, credentials.csv, .git-credentials, *-credentials.json)"],
  ["alice_accessKeys.csv", "access keys file (accessKeys.csv, *_accessKeys.csv, rootkey.csv, api_key*)"],
  ["accessKeys.csv", "access keys file (accessKeys.csv, *_accessKeys.csv, rootkey.csv, api_key*)"],
  ["rootkey.csv", "access keys file (accessKeys.csv, *_accessKeys.csv, rootkey.csv, api_key*)"],
  ["hf_token.txt", "token file (token.txt, hf_token.txt, *token*)"],
  ["token.txt", "token file (token.txt, hf_token.txt, *token*)"],
  [".git-credentials.txt", "credentials file (credentials, credentials.csv, .git-credentials, *-credentials.json)"],
  ["service-account.jsonl", "service-account key (service-account*.json, *.jsonl)"],
  ["client_secret_1234.jsonl", "secrets file (secrets.*, client_secret*.json, *secret*)"],
  ["secrets.csv", "secrets file (secrets.*, client_secret*.json, *secret*)"],
  ["passwords.txt", "password file (passwords.txt, *password*)"],
  [".netrc.txt", "login credentials file (.netrc)"],
  [".pgpass.txt", "database password file (.pgpass, .my.cnf)"],
  [".env.txt", "environment file (.env, .env.*, .envrc)"],
  ["id_rsa.txt", "SSH private key (id_rsa*, id_ed25519*, id_ecdsa*, *_rsa)"],
];
/** What each credential file holds: found nowhere the provider sees. */
const secretOf = (name: string) => `LEAKED-${name.replace(/[^a-z0-9]/gi, "")}-0123456789`;
const DATASET_FILES: [Buffer | string, string][] = [
  [PNG, "001.png"],
  ["a portrait of alice's cat", "001.txt"],
  ['{"file_name": "001.png"}', "metadata.jsonl"],
  [PNG, "secret_garden.png"],
];

let t: TestStack;
let fake: FakeReplicate;
let admin: { key: string; cookie: string };
let alice: { key: string; id: number };
let bob: { key: string; id: number };
let lena: { key: string; id: number };
let vera: { key: string; id: number };

async function call(method: string, path: string, key: string, json?: unknown): Promise<Reply> {
  return t.call(method, path, { auth: { key }, ...(json === undefined ? {} : { json }) });
}
const submit = (key: string, body: Record<string, unknown> = {}) =>
  call("POST", "/api/cloud/jobs/submit", key, { config_name: "portraits", provider: "replicate", ...body });
/** Submits with the confirmation of the current summary (consent mode ask). */
async function confirmedSubmit(key: string): Promise<Reply> {
  const dry = await submit(key, { dry_run: true });
  expect(dry.status, dry.text).toBe(200);
  return submit(key, { confirm_summary: dry.body.summary.summary_id });
}
const sharing = (key: string, allow_cloud: unknown, folder = "portraits") =>
  call("PUT", `/api/datasets/folders/${folder}/cloud-sharing`, key, { allow_cloud });
async function upload(target: string, files: [Buffer | string, string][], key: string): Promise<void> {
  const form = new FormData();
  form.set("target_path", target);
  for (const [bytes, name] of files) form.append("files[]", new Blob([typeof bytes === "string" ? bytes : new Uint8Array(bytes)]), name);
  const reply = await t.call("POST", "/api/datasets/upload", { body: form, auth: { key } });
  if (reply.status !== 201) throw new Error(`upload ${target}: ${reply.status} ${reply.text}`);
}
/** The archives the provider received (the upload requests' bodies), as text. */
const uploadsAtProvider = () =>
  fake.requests.filter((r) => r.method === "POST" && r.path === "/v1/files").map((r) => r.bodyBytes.toString("latin1"));
/** How many jobs a user has waiting, running or blocked. */
async function jobsOf(key: string): Promise<number> {
  const reply = await call("GET", "/api/queue/me", key);
  expect(reply.status, reply.text).toBe(200);
  return reply.body.pending_count + reply.body.running_count + reply.body.blocked_count;
}
/** The uploads and trainings sent to the provider (its polls of running jobs aside). */
const sentToProvider = () => fake.requests.filter((r) => r.method === "POST").length;

beforeAll(async () => {
  fake = await startFakeReplicate({ token: TOKEN, run: { startingMs: 50, processingMs: 300, logEveryMs: 1000 } });
  t = await startTestStack(undefined, { REPLICATE_API_TOKEN: TOKEN });
  admin = await setUpAdmin(t);
  alice = await createUserWithKey(t, { cookie: admin.cookie }, "researcher", "alice");
  bob = await createUserWithKey(t, { cookie: admin.cookie }, "researcher", "bob");
  lena = await createUserWithKey(t, { cookie: admin.cookie }, "lead", "lena");
  vera = await createUserWithKey(t, { cookie: admin.cookie }, "viewer", "vera");
  const setup = [
    await call(
      "PUT",
      "/api/cloud/providers/replicate",
      admin.key,
      fakeReplicateSettings(fake, { training_destination: "acme/portraits", http_timeout: 2 }),
    ),
    await call("PUT", "/api/cloud/settings", admin.key, { public_url: t.base, poll_interval_seconds: 1 }),
    await call("POST", "/api/queue/concurrency", admin.key, { user_max_concurrent: 10 }),
    await call("PUT", "/api/queue/approval-rules", admin.key, { cloud_cost_threshold: null }),
    // Its starter dataloader names datasets/portraits: Alice's folder, whoever submits it.
    await call("POST", "/api/configs/environments", alice.key, { name: "portraits", model_family: "flux", model_type: "lora" }),
    await call("POST", "/api/configs/environments", bob.key, { name: "bobs", model_family: "flux", model_type: "lora" }),
  ];
  for (const reply of setup) expect(reply.status, reply.text).toBeLessThan(300);
  await upload("portraits", [...DATASET_FILES, ...CREDENTIAL_FILES.map(([name]): [string, string] => [secretOf(name), name])], alice.key);
  await upload("bobs", [[PNG, "001.png"]], bob.key);
}, 60_000);
afterAll(async () => {
  await Promise.all([t?.stop(), fake?.stop()]);
});

describe("the exclusions, as the submitter sees them", () => {
  it("lists every credential file of the allowed types with its reason, and keeps the dataset's own files", async () => {
    const dry = await submit(alice.key, { dry_run: true });
    expect(dry.status, dry.text).toBe(200);
    expect(dry.body.summary.excluded).toEqual(
      CREDENTIAL_FILES.map(([name, reason]) => ({ path: `datasets/portraits/${name}`, reason })).sort((a, b) =>
        a.path < b.path ? -1 : a.path > b.path ? 1 : 0,
      ),
    );
    expect(dry.body.summary.datasets).toEqual([
      { id: expect.any(String), path: "datasets/portraits", files: DATASET_FILES.length, bytes: expect.any(Number) },
    ]);
  });
});

describe("another user's dataset folder", () => {
  it("is refused to a researcher and to a lead, naming the folder and its owner; nothing is stored or sent", async () => {
    const before = sentToProvider();
    for (const who of [bob, lena]) {
      for (const body of [{ dry_run: true }, { confirm_summary: "anything" }]) {
        const refused = await submit(who.key, body);
        expect([refused.status, refused.body.code], refused.text).toEqual([403, "dataset_not_yours"]);
        expect(refused.body.detail).toContain("datasets/portraits (owned by alice)");
        expect(refused.body.detail).toContain("PUT /api/datasets/folders/{name}/cloud-sharing");
      }
      expect(await jobsOf(who.key)).toBe(0);
    }
    expect(sentToProvider()).toBe(before);
  });

  it("still goes for its owner and for folders of one's own", async () => {
    expect((await submit(alice.key, { dry_run: true })).status).toBe(200);
    const own = await call("POST", "/api/cloud/jobs/submit", bob.key, { config_name: "bobs", provider: "replicate", dry_run: true });
    expect(own.status, own.text).toBe(200);
  });

  it("goes for an admin without the owner's consent", async () => {
    const reply = await confirmedSubmit(admin.key);
    expect(reply.status, reply.text).toBe(200);
    expect(reply.body.job_id).toEqual(expect.any(String));
  });
});

describe("the folder's cloud sharing setting", () => {
  it("is set by the folder's owner or an admin only, and read by anyone", async () => {
    for (const who of [bob, lena]) {
      const refused = await sharing(who.key, true);
      expect([refused.status, refused.body.code], refused.text).toEqual([403, "folder_not_yours"]);
      expect(refused.body.detail).toContain("alice");
    }
    expect((await sharing(vera.key, true)).status).toBe(403);
    const read = await call("GET", "/api/datasets/folders/portraits/cloud-sharing", vera.key);
    expect(read.body).toEqual({ folder: "portraits", owner: "alice", allow_cloud: false, changed_by: null, changed_at: null });

    expect((await sharing(alice.key, "yes")).status).toBe(422);
    expect((await sharing(alice.key, true, "nowhere")).status).toBe(404);
    expect((await call("GET", "/api/datasets/folders/nowhere/cloud-sharing", vera.key)).status).toBe(404);

    const set = await sharing(alice.key, true);
    expect(set.status, set.text).toBe(200);
    expect(set.body).toMatchObject({ folder: "portraits", owner: "alice", allow_cloud: true, changed_by: "alice" });
    expect((await call("GET", "/api/datasets/folders/portraits/cloud-sharing", bob.key)).body).toEqual(set.body);
    const byAdmin = await sharing(admin.key, true);
    expect(byAdmin.body).toMatchObject({ owner: "alice", allow_cloud: true, changed_by: "admin" });
    // Audited (written after the answer): who let the folder go, and that refusals left no entry.
    const entries = await until("the sharing changes in the audit trail", async () => {
      const listed = (await call("GET", "/api/audit?event_type=dataset_cloud_sharing_changed", admin.key)).body.entries as any[];
      return listed.length >= 2 && listed;
    });
    expect(entries.map((e) => [e.actor, e.target, e.details.allow_cloud]).sort()).toEqual([
      ["admin", "datasets/portraits", true],
      ["alice", "datasets/portraits", true],
    ]);
  });

  it("lets another user's job package the folder once the owner allows it, without the credential files", async () => {
    const reply = await confirmedSubmit(bob.key);
    expect(reply.status, reply.text).toBe(200);
    const archives = await until("Bob's archive to reach the provider", () => {
      const bodies = uploadsAtProvider().filter((b) => b.includes("a portrait of alice's cat"));
      return bodies.length >= 2 && bodies; // the admin's job and Bob's
    });
    for (const body of archives) {
      for (const [name] of CREDENTIAL_FILES) {
        expect(body).not.toContain(secretOf(name));
        expect(body).not.toContain(`datasets/portraits/${name}`);
      }
      expect(body).toContain("datasets/portraits/secret_garden.png");
    }
    // Its training is created after the upload: the last request it sends (the next test counts them).
    await until("Bob's training at the provider", () => fake.trainings.size >= 2);
  }, 30_000);

  it("refuses new submissions again once the owner takes the consent back", async () => {
    expect((await sharing(alice.key, false)).body).toMatchObject({ allow_cloud: false, changed_by: "alice" });
    const before = sentToProvider();
    for (const body of [{ dry_run: true }, { confirm_summary: "anything" }]) {
      const refused = await submit(bob.key, body);
      expect([refused.status, refused.body.code]).toEqual([403, "dataset_not_yours"]);
    }
    expect(sentToProvider()).toBe(before);
  });
});
