// `jobs notifications`: the built binary against the real local stack, with a webhook sink started
// here and a registered box (no runner process) whose job the test starts and finishes: the
// preferences shown (text and --format json, the API's answer), changed option by option (the
// rest kept), the API's refusals (unknown kind, bad address, private URL) printed naming the field
// with exit 1 and nothing changed, usage mistakes exit 2, and the deliveries a job's start and end
// made, as a table and as the API's JSON. Attackers: a viewer's `set` changes only the viewer's own; a
// control character in a stored value is printed as an escape.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jobs } from "../helpers/cli";
import { startHttpSink, type HttpSink } from "../helpers/sinks";
import { finishJob, gpuInventory, registerBox } from "../helpers/spend";
import { createUserWithKey, setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";
import { until } from "../helpers/wait";

let t: TestStack;
let admin: { key: string; cookie: string };
let ada: { key: string };
let vera: { key: string };
let hook: HttpSink;

const as = (who: { key: string }, args: string[]) => jobs(args, { env: { SERVICE_URL: t.base, SERVICE_API_KEY: who.key } });
const prefsOf = async (who: { key: string }) => (await t.call("GET", "/api/users/me/notifications", { auth: who })).body;
/** `name: value` lines of `jobs notifications` as an object. */
const fields = (stdout: string) =>
  Object.fromEntries(
    stdout
      .trimEnd()
      .split("\n")
      .map((line) => [line.slice(0, line.indexOf(":")), line.slice(line.indexOf(":") + 1).trim()]),
  );

beforeAll(async () => {
  t = await startTestStack();
  admin = await setUpAdmin(t);
  ada = await createUserWithKey(t, { cookie: admin.cookie }, "researcher", "ada");
  vera = await createUserWithKey(t, { cookie: admin.cookie }, "viewer", "vera");
  hook = await startHttpSink();
}, 60_000);
afterAll(async () => {
  await hook?.close();
  await t?.stop();
});

describe("jobs notifications", () => {
  it("shows preferences never saved: every kind, no channel, no secret yet; --format json is the API's answer", async () => {
    const run = await as(ada, ["notifications"]);
    expect(run.code, run.stderr).toBe(0);
    expect(fields(run.stdout)).toEqual({
      kinds:
        "job.started,job.stalled,job.completed,job.failed,approval.needed,approval.decided,budget.warning,budget.exceeded,gpu.quarantined",
      webhook: "-",
      "webhook secret": "- (made when you first save)",
      slack: "-",
      email: "-",
      updated: "never saved: nothing is sent to you",
    });
    const json = await as(ada, ["notifications", "show", "--format", "json"]);
    expect(json.code, json.stderr).toBe(0);
    expect(json.json()).toEqual(await prefsOf(ada));
  });

  it("prints the API's refusal naming the field, exits 1 and changes nothing", async () => {
    const before = await prefsOf(ada);
    const kind = await as(ada, ["notifications", "set", "--kinds", "job.completed,job.finished"]);
    expect([kind.code, kind.stdout]).toEqual([1, ""]);
    expect(kind.stderr).toMatch(/body\.kinds\.1/);
    const email = await as(ada, ["notifications", "set", "--email", "not-an-address"]);
    expect([email.code, email.stdout]).toEqual([1, ""]);
    expect(email.stderr).toMatch(/body\.channels\.email\.address: .*email/i);
    // Private targets are not allowed yet: a loopback webhook is refused, as JSON on stderr with --format json.
    const loopback = await as(ada, ["notifications", "set", "--webhook", `${hook.url}/ada`, "--format", "json"]);
    expect([loopback.code, loopback.stdout]).toEqual([1, ""]);
    const error = JSON.parse(loopback.stderr).error;
    expect(error).toMatchObject({ status: 422, code: "notification_target_refused", errors: [{ path: "body.channels.webhook.url" }] });
    expect(await prefsOf(ada)).toEqual(before);
    expect(hook.requests).toEqual([]);
  });

  it("refuses a call that names nothing or contradicts itself (exit 2), asking nothing of the service", async () => {
    const nothing = await as(ada, ["notifications", "set"]);
    expect([nothing.code, nothing.stdout]).toEqual([2, ""]);
    expect(nothing.stderr).toMatch(/nothing to change/);
    const both = await as(ada, ["notifications", "set", "--slack", "https://hooks.example.com/x", "--clear-slack"]);
    expect([both.code, both.stdout]).toEqual([2, ""]);
    expect(both.stderr).toMatch(/--slack and --clear-slack/);
    const keyless = await jobs(["notifications"], { env: { SERVICE_URL: t.base } });
    expect(keyless.code).toBe(2);
    expect((await prefsOf(ada)).updated_at).toBeNull();
  });

  it("sets what it names and keeps the rest", async () => {
    expect((await t.call("PUT", "/api/admin/webhooks", { json: { allow_private_targets: true }, auth: admin })).status).toBe(200);
    const set = await as(ada, [
      "notifications",
      "set",
      "--kinds",
      "job.started,job.completed",
      "--webhook",
      `${hook.url}/ada`,
      "--email",
      "ada@example.com",
    ]);
    expect(set.code, set.stderr).toBe(0);
    const saved = await prefsOf(ada);
    expect(saved).toMatchObject({
      kinds: ["job.started", "job.completed"],
      channels: { webhook: { url: `${hook.url}/ada` }, slack: null, email: { address: "ada@example.com" } },
    });
    expect(fields(set.stdout)).toEqual({
      kinds: "job.started,job.completed",
      webhook: `${hook.url}/ada`,
      "webhook secret": saved.webhook_secret,
      slack: "-",
      email: "ada@example.com",
      updated: saved.updated_at,
    });
    expect(set.stderr).toMatch(/Saved\./);

    const cleared = await as(ada, ["notifications", "set", "--clear-email", "--slack", "https://hooks.example.com/services/T/B/X"]);
    expect(cleared.code, cleared.stderr).toBe(0);
    expect(await prefsOf(ada)).toMatchObject({
      kinds: ["job.started", "job.completed"],
      channels: { webhook: { url: `${hook.url}/ada` }, slack: { url: "https://hooks.example.com/services/T/B/X" }, email: null },
      webhook_secret: saved.webhook_secret,
    });
    const none = await as(ada, ["notifications", "set", "--clear-slack", "--kinds", "", "--format", "json"]);
    expect(none.code, none.stderr).toBe(0);
    expect(none.json()).toMatchObject({ kinds: [], channels: { slack: null, webhook: { url: `${hook.url}/ada` } } });
    const back = await as(ada, ["notifications", "set", "--kinds", "job.started,job.completed"]);
    expect(back.code, back.stderr).toBe(0);
  });

  it("lists the deliveries a job's start and end made, as a table and as the API's JSON", async () => {
    const box = await registerBox(t, admin.key, "box", "local", gpuInventory(1, "NVIDIA L40S"));
    expect((await t.call("POST", "/api/configs/environments", { json: { name: "train" }, auth: admin })).status).toBe(201);
    await t.call("PUT", "/api/configs/train", { json: { config: { "--num_processes": 1 } }, auth: admin });
    const submitted = await t.call("POST", "/api/queue/submit", { json: { config_name: "train", target: "local" }, auth: ada });
    expect(submitted.body.status, submitted.text).toBe("running");
    const jobId = submitted.body.job_id as string;
    await finishJob(t, jobId, box);
    await until("both webhooks", () => hook.requests.length >= 2);
    const api = (await t.call("GET", "/api/users/me/notifications/deliveries", { auth: ada })).body;
    await until("both delivered", async () => {
      const now = (await t.call("GET", "/api/users/me/notifications/deliveries", { auth: ada })).body.deliveries as any[];
      return now.length === 2 && now.every((d) => d.status === "delivered");
    });

    const table = await as(ada, ["notifications", "deliveries"]);
    expect(table.code, table.stderr).toBe(0);
    const rows = table.stdout
      .trimEnd()
      .split("\n")
      .map((line) => line.trim().split(/\s{2,}/));
    expect(rows[0]).toEqual(["WHEN", "KIND", "CHANNEL", "TARGET", "STATUS", "ATTEMPTS", "NEXT RETRY", "LAST ERROR"]);
    expect(rows.slice(1).map((r) => r.slice(1))).toEqual([
      ["job.completed", "webhook", `${hook.url}/ada`, "delivered", "1", "-", "-"],
      ["job.started", "webhook", `${hook.url}/ada`, "delivered", "1", "-", "-"],
    ]);
    expect(api.deliveries.map((d: any) => d.kind).sort()).toEqual(["job.completed", "job.started"]);

    const json = await as(ada, ["notifications", "deliveries", "--kind", "job.completed", "--format", "json"]);
    expect(json.code, json.stderr).toBe(0);
    expect(json.json()).toEqual((await t.call("GET", "/api/users/me/notifications/deliveries?kind=job.completed", { auth: ada })).body);
    expect(json.json().deliveries).toHaveLength(1);

    const badKind = await as(ada, ["notifications", "deliveries", "--kind", "job.finished"]);
    expect([badKind.code, badKind.stdout]).toEqual([1, ""]);
    expect(badKind.stderr).toMatch(/query\.kind/);
    const badLimit = await as(ada, ["notifications", "deliveries", "--limit", "0"]);
    expect([badLimit.code, badLimit.stdout]).toEqual([1, ""]);
    expect(badLimit.stderr).toMatch(/query\.limit/);
  });

  it("lets a viewer change only the viewer's own preferences and see only the viewer's own deliveries", async () => {
    const adas = await prefsOf(ada);
    const set = await as(vera, ["notifications", "set", "--kinds", "job.failed", "--email", "vera@example.com"]);
    expect(set.code, set.stderr).toBe(0);
    expect(await prefsOf(vera)).toMatchObject({ kinds: ["job.failed"], channels: { email: { address: "vera@example.com" } } });
    expect(await prefsOf(ada)).toEqual(adas);
    const deliveries = await as(vera, ["notifications", "deliveries", "--format", "json"]);
    expect(deliveries.json()).toEqual({ deliveries: [] });
    // A control character in a stored value reaches the terminal as an escape, never raw.
    const ansi = await as(vera, ["notifications", "set", "--slack", "https://hooks.example.com/\x1b[2Jgone"]);
    expect(ansi.code, ansi.stderr).toBe(0);
    expect((await prefsOf(vera)).channels.slack.url).toBe("https://hooks.example.com/\x1b[2Jgone");
    expect(ansi.stdout).not.toContain("\x1b");
    expect(fields(ansi.stdout).slack).toMatch(/^https:\/\/hooks\.example\.com\/.+\[2Jgone$/);
  });
});
