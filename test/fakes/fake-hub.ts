import { createHash } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { closeServer, readBody } from "./fake-object-store";

/*
 * The model hub's commit endpoint (Hugging Face: POST /api/models/{repo}/commit/{revision}, an
 * NDJSON body of a header line and one line per file), checking the bearer token and recording
 * each commit, for tests of hub deliveries.
 */

export interface HubCommit {
  repo: string;
  revision: string;
  summary: string;
  files: { path: string; bytes: Buffer }[];
}

export interface FakeHub {
  url: string;
  commits: HubCommit[];
  requests: { method: string; path: string; authorization: string | null }[];
  stop(): Promise<void>;
}

/**
 * Starts the hub on 127.0.0.1 (a free port); only `token` may commit.
 *
 * @example
 * const hub = await startFakeHub({ token: "hf_test" });
 * // ... a job delivers with HF_ENDPOINT=hub.url
 * hub.commits[0]?.files[0]?.path; // "model.safetensors"
 */
export async function startFakeHub(options: { token: string }): Promise<FakeHub> {
  const commits: HubCommit[] = [];
  const requests: FakeHub["requests"] = [];

  const server = http.createServer(async (req, res) => {
    const url = new URL(req.url ?? "/", "http://hub");
    const authorization = req.headers.authorization ?? null;
    requests.push({ method: req.method ?? "", path: url.pathname, authorization });
    const body = await readBody(req).catch(() => null);
    if (!body) return;
    const answer = (status: number, value: unknown) => {
      res.writeHead(status, { "Content-Type": "application/json" });
      res.end(JSON.stringify(value));
    };

    const route = /^\/api\/models\/([\w.-]+\/[\w.-]+)\/commit\/([\w.-]+)$/.exec(url.pathname);
    if (req.method !== "POST" || !route) return answer(404, { error: `${req.method} ${url.pathname} is not served by this hub` });
    if (authorization !== `Bearer ${options.token}`) return answer(401, { error: "Invalid credentials in Authorization header" });

    let summary = "";
    const files: HubCommit["files"] = [];
    try {
      for (const line of body.toString("utf8").split("\n")) {
        if (!line.trim()) continue;
        const entry = JSON.parse(line) as { key: string; value: Record<string, string> };
        if (entry.key === "header") summary = entry.value.summary ?? "";
        else if (entry.key === "file") {
          if (entry.value.encoding !== "base64" || typeof entry.value.path !== "string" || typeof entry.value.content !== "string")
            return answer(400, { error: "A file line needs path, content and encoding base64" });
          files.push({ path: entry.value.path, bytes: Buffer.from(entry.value.content, "base64") });
        }
      }
    } catch {
      return answer(400, { error: "The commit body is not NDJSON" });
    }
    if (!summary) return answer(400, { error: "The commit has no header line with a summary" });
    commits.push({ repo: route[1]!, revision: route[2]!, summary, files });
    const oid = createHash("sha1").update(body).digest("hex");
    answer(200, { commitUrl: `http://127.0.0.1/${route[1]}/commit/${oid}`, commitOid: oid, pullRequestUrl: null });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, commits, requests, stop: () => closeServer(server) };
}
