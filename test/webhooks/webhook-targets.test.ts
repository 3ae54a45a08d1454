// Outbound webhook targets over real HTTP (issue 12): the training forms refuse private targets
// written with tricks, more than 5 targets and a reporting interval under 5 s (422, naming the
// option, nothing queued); the local host's outbound fetcher resolves a name once, refuses it
// when it resolves to a private address (the receiver gets nothing), and otherwise connects to
// the very address it checked.
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ALLOW_PRIVATE_HEADER, deliverGuarded, type Resolver } from "../../edge/local/webhook-outbound";
import { setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";

let t: TestStack;
let admin: { key: string; cookie: string };
let receiver: Server;
let port: number;
const received: { host: string | undefined; body: string }[] = [];

const INLINE = {
  "--model_family": "demo",
  "--model_type": "full",
  "--pretrained_model_name_or_path": "none",
  "--output_dir": "output",
  "--data_backend_config": "d.json",
  "--max_train_steps": "3",
  "--num_processes": "0",
};
const post = (path: string, fields: Record<string, string>) => t.call("POST", path, { json: fields, auth: { key: admin.key } });
const queueLength = async () => (await t.call("GET", "/api/queue?limit=500", { auth: { key: admin.key } })).text;
const hooks = (...urls: string[]) => JSON.stringify(urls.map((callback_url) => ({ webhook_type: "raw", callback_url })));

beforeAll(async () => {
  t = await startTestStack();
  admin = await setUpAdmin(t);
  receiver = createServer((req: IncomingMessage, res) => {
    let body = "";
    req.on("data", (chunk) => (body += chunk));
    req.on("end", () => {
      received.push({ host: req.headers.host, body });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r));
  port = (receiver.address() as AddressInfo).port;
});
afterAll(async () => {
  receiver?.close();
  await t?.stop();
});

describe("the training forms", () => {
  it("refuse private targets written with tricks (422 naming --webhook_config), queueing nothing", async () => {
    const before = await queueLength();
    for (const url of [
      "http://localhost./h",
      "http://[64:ff9b::7f00:1]/h",
      "http://[2002:a00:1::]/h",
      "http://[::7f00:1]/h",
      "http://0x7f.1/h",
    ]) {
      const refused = await post("/api/training/start", { ...INLINE, "--webhook_config": hooks(url) });
      expect(refused.status, url).toBe(422);
      expect(refused.body.errors, url).toEqual([
        { path: "form.--webhook_config", message: expect.stringMatching(new RegExp(`^${url.replace(/[[\]().]/g, "\\$&")}: `)) },
      ]);
    }
    expect(await queueLength()).toBe(before);
  });

  it("refuse more than 5 targets and a reporting interval under 5 s, naming each option, queueing nothing", async () => {
    const before = await queueLength();
    const six = hooks(...Array.from({ length: 6 }, (_, i) => `https://h${i}.example.com/in`));
    const refused = await post("/api/training/start", { ...INLINE, "--webhook_config": six, "--webhook_reporting_interval": "1" });
    expect(refused.status).toBe(422);
    expect(refused.body.errors).toEqual([
      { path: "form.--webhook_config", message: "at most 5 webhook targets per job; this names 6" },
      { path: "form.--webhook_reporting_interval", message: "must be at least 5 (seconds)" },
    ]);
    expect(await queueLength()).toBe(before);
  });

  it("accept up to 5 public targets and an interval of 5 s", async () => {
    const five = hooks(...Array.from({ length: 5 }, (_, i) => `https://h${i}.example.com/in`));
    const valid = await post("/api/training/validate", { ...INLINE, "--webhook_config": five, "--webhook_reporting_interval": "5" });
    expect(valid.body).toMatchObject({ valid: true, errors: [] });
  });
});

describe("the local host's outbound fetcher", () => {
  const send = (url: string, allowPrivate: boolean, resolve: Resolver) =>
    deliverGuarded(
      new Request(url, {
        method: "POST",
        headers: { "content-type": "application/json", [ALLOW_PRIVATE_HEADER]: allowPrivate ? "1" : "0" },
        body: '{"type":"job.started"}',
      }),
      resolve,
    );
  // The names below resolve as a DNS server answering for them would (nothing here serves DNS).
  const resolvesTo =
    (table: Record<string, string[]>): Resolver =>
    async (name) =>
      (table[name] ?? []).map((address) => ({ address, family: address.includes(":") ? 6 : 4 }));

  it("refuses a public-looking name that resolves to a private address; the receiver gets nothing", async () => {
    const resolve = resolvesTo({
      "hooks.example.com": ["127.0.0.1"],
      "mixed.example.com": ["93.184.215.14", "10.0.0.7"],
      "nat64.example.com": ["64:ff9b::a00:7"],
    });
    expect(await send(`http://hooks.example.com:${port}/in`, false, resolve)).toEqual({
      refused:
        "hooks.example.com resolves to 127.0.0.1: 127.0.0.1 is a loopback, private or reserved address; an admin can allow private targets (PUT /api/admin/webhooks)",
    });
    expect(await send(`http://mixed.example.com:${port}/in`, false, resolve)).toMatchObject({
      refused: expect.stringMatching(/^mixed\.example\.com resolves to 10\.0\.0\.7: /),
    });
    expect(await send(`http://nat64.example.com:${port}/in`, false, resolve)).toMatchObject({
      refused: expect.stringMatching(/\(rfc6052\)/),
    });
    expect(await send(`http://localhost.:${port}/in`, false, resolve)).toEqual({
      refused: "localhost. ends with a dot: write the name without it",
    });
    expect(received).toEqual([]);
  });

  it("connects to the address it checked, under the name, when the target is allowed", async () => {
    // Only with private targets allowed can a test receiver on loopback stand in for a public one.
    let lookups = 0;
    const resolve: Resolver = async () => (lookups++ === 0 ? [{ address: "127.0.0.1", family: 4 }] : [{ address: "10.9.9.9", family: 4 }]);
    expect(await send(`http://receiver.example.com:${port}/in`, true, resolve)).toEqual({ status: 204 });
    expect(lookups).toBe(1);
    expect(received).toEqual([{ host: `receiver.example.com:${port}`, body: '{"type":"job.started"}' }]);
  });
});
