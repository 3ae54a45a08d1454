// Issue 26: the `jobs` CLI keeps its credentials where they belong. A service that redirects to
// another origin never gets the API key (or a password) sent there, while a redirect within its
// own origin is followed; plain http:// is refused except to this machine; and the config file
// is written new, so a link planted at its temporary name (or at its own) is never followed.
import { existsSync, lstatSync, mkdtempSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { createServer, type IncomingHttpHeaders, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readConfig, writeConfig } from "../../runner/cli/config-file";
import { jobs, tempConfigHome } from "../helpers/cli";
import { createUserWithKey, setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";

let t: TestStack;
let rita: { key: string };
const RITA_PASSWORD = "rita-password"; // createUserWithKey's password for "rita"

interface Recorded {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/** A local server recording every request it gets; `answer` writes the response. */
async function recorder(answer: (request: Recorded, res: ServerResponse) => unknown) {
  const requests: Recorded[] = [];
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const request = { method: req.method!, url: req.url!, headers: req.headers, body: Buffer.concat(chunks).toString() };
    requests.push(request);
    await answer(request, res);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, requests, server };
}

let elsewhere: Awaited<ReturnType<typeof recorder>>;
let front: Awaited<ReturnType<typeof recorder>>;

beforeAll(async () => {
  t = await startTestStack();
  const admin = await setUpAdmin(t);
  rita = await createUserWithKey(t, { key: admin.key }, "researcher", "rita");
  // Another origin (another port): it must never see a key or a password.
  elsewhere = await recorder((_request, res) => res.writeHead(200, { "content-type": "application/json" }).end("{}"));
  // The service behind a front: /moved/... is passed to the real service; /away/... is sent to
  // the other origin; anything else is redirected (307) to /moved/... on the same origin.
  front = await recorder(async (request, res) => {
    if (request.url.startsWith("/away/"))
      return res.writeHead(307, { location: `${elsewhere.url}${request.url.slice("/away".length)}` }).end();
    if (!request.url.startsWith("/moved/")) return res.writeHead(307, { location: `/moved${request.url}` }).end();
    const headers = Object.fromEntries(
      Object.entries(request.headers).filter(([name]) => name !== "host" && name !== "content-length"),
    ) as Record<string, string>;
    const answer = await fetch(t.base + request.url.slice("/moved".length), {
      method: request.method,
      headers,
      body: request.body || undefined,
    });
    res.writeHead(answer.status, { "content-type": answer.headers.get("content-type") ?? "application/json" });
    res.end(Buffer.from(await answer.arrayBuffer()));
  });
}, 60_000);
afterAll(async () => {
  elsewhere?.server.close();
  front?.server.close();
  await t?.stop();
});

describe("a redirect", () => {
  it("within the service's own origin is followed with the key", async () => {
    const run = await jobs(["whoami", "--format", "json"], { env: { SERVICE_URL: front.url, SERVICE_API_KEY: rita.key } });
    expect(run.code, run.stderr).toBe(0);
    expect(run.json().user.username).toBe("rita");
    expect(front.requests.map((r) => [r.url, r.headers["x-api-key"]])).toEqual([
      ["/api/users/me", rita.key],
      ["/moved/api/users/me", rita.key],
    ]);
  });

  it("to another origin is not followed: the key never reaches it, and the error names where it pointed", async () => {
    const run = await jobs(["whoami"], { env: { SERVICE_URL: `${front.url}/away`, SERVICE_API_KEY: rita.key } });
    expect(run.code).toBe(1);
    expect(run.stderr).toBe(
      `error: GET ${front.url}/away/api/users/me redirected to ${elsewhere.url}, another origin: not followed, so your credential is not sent there (if the service moved, use its new URL)\n`,
    );
    expect(elsewhere.requests).toEqual([]);
  });

  it("of a login to another origin never carries the password there", async () => {
    const run = await jobs(["login", "--url", `${front.url}/away`, "--username", "rita", "--password-stdin"], {
      input: RITA_PASSWORD,
    });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`redirected to ${elsewhere.url}, another origin: not followed`);
    expect(elsewhere.requests).toEqual([]);
  });
});

describe("a plain http:// service URL", () => {
  it("to this machine logs in; to another machine it is refused before anything is sent (exit 2)", async () => {
    const home = tempConfigHome();
    const local = await jobs(["login", "--url", t.base, "--username", "rita", "--password-stdin"], {
      env: { XDG_CONFIG_HOME: home },
      input: RITA_PASSWORD,
    });
    expect(local.code, local.stderr).toBe(0);
    const refusal = (url: string) =>
      `error: the service URL ${url} is plain http:// to another machine: your password and API key would cross the network unencrypted. Use https:// (http:// is only for this machine: localhost, 127.0.0.1, [::1])\n`;
    for (const url of ["http://example.com", "http://10.1.2.3:8787", "http://127.0.0.1.example.com"]) {
      const login = await jobs(["login", "--url", url, "--username", "rita", "--password-stdin"], {
        env: { XDG_CONFIG_HOME: home },
        input: RITA_PASSWORD,
      });
      expect([login.code, login.stderr]).toEqual([2, refusal(url)]);
      const list = await jobs(["list"], { env: { SERVICE_URL: url, SERVICE_API_KEY: rita.key } });
      expect([list.code, list.stderr]).toEqual([2, refusal(url)]);
    }
    // The key stored by the first login is untouched by the refused ones.
    expect(JSON.parse(readFileSync(join(home, "training-service", "config.json"), "utf8")).url).toBe(t.base);
    for (const url of [`http://localhost:${new URL(t.base).port}`, `http://[::1]:9`]) {
      const list = await jobs(["list"], { env: { SERVICE_URL: url, SERVICE_API_KEY: rita.key } });
      expect(list.stderr).not.toContain("plain http://");
    }
  });
});

describe("the config file", () => {
  const victimIn = (dir: string) => {
    const victim = join(dir, "victim.txt");
    // Someone else's file that reads as an empty config, so that `jobs login` gets as far as writing.
    writeFileSync(victim, "{}\n");
    return victim;
  };

  it("is written new: a link planted at its temporary name is removed, not followed", () => {
    const dir = mkdtempSync(join(tmpdir(), "jobs-config-"));
    const victim = victimIn(dir);
    const file = join(dir, "config.json");
    symlinkSync(victim, `${file}.${process.pid}.tmp`);
    writeConfig({ url: "https://train.example.com", api_key: "st_new", username: "rita" }, file);
    expect(readFileSync(victim, "utf8")).toBe("{}\n");
    expect(readConfig(file)).toEqual({ url: "https://train.example.com", api_key: "st_new", username: "rita" });
    expect(lstatSync(file).isFile()).toBe(true);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(readdirSync(dir).sort()).toEqual(["config.json", "victim.txt"]);
  });

  it("replaces a link at its own name rather than writing through it, when `jobs login` stores a key", async () => {
    const dir = mkdtempSync(join(tmpdir(), "jobs-config-"));
    const victim = victimIn(dir);
    const file = join(dir, "config.json");
    symlinkSync(victim, file);
    const run = await jobs(["login", "--url", t.base, "--username", "rita", "--password-stdin"], {
      env: { JOBS_CONFIG: file },
      input: RITA_PASSWORD,
    });
    expect(run.code, run.stderr).toBe(0);
    expect(readFileSync(victim, "utf8")).toBe("{}\n");
    expect(lstatSync(file).isFile()).toBe(true);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(readConfig(file)).toMatchObject({ url: t.base, username: "rita" });
    expect(existsSync(`${file}.${process.pid}.tmp`)).toBe(false);
  });
});
