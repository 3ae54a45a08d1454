import { randomBytes, timingSafeEqual } from "node:crypto";
import { chmodSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/*
 * Events in through webhooks (trainer protocol): SimpleTuner reports progress by POSTing "raw"
 * webhook JSON to the callback URLs in its --webhook_config. The runner gives each job's trainer
 * one such URL and turns every POST into an event. The job's own receivers are not given to the
 * trainer: the edge sends them the lifecycle (signed, retried), so nothing reaches them twice or
 * unsigned.
 *
 * The URL holds a secret of the job's own (its path), so no other process on the box - another
 * job's trainer above all - can post into this job: anything else is 404. Sandboxed with a network
 * of its own, the trainer reaches it only through its gateway's socket (runner/agent/egress.ts); else it
 * listens on loopback.
 */

const MAX_BODY = 1024 * 1024;

/** A posted body as an event: its own `type`, else SimpleTuner's `message_type`, else `webhook`. */
export function webhookToEvent(body: unknown): { type: string } & Record<string, unknown> {
  if (body && typeof body === "object" && !Array.isArray(body)) {
    const b = body as Record<string, unknown>;
    if (typeof b.type === "string" && b.type) return b as { type: string } & Record<string, unknown>;
    if (typeof b.message_type === "string" && b.message_type) return { ...b, type: b.message_type };
  }
  return { type: "webhook", data: body };
}

export interface Callback {
  url: string;
  close(): Promise<void>;
}

/**
 * Starts a job's callback. `socket`: listen on this Unix socket (the job's gateway), the URL then
 * naming `port` on the sandbox's own loopback; else a free loopback port.
 */
export async function startCallback(
  onEvent: (event: { type: string } & Record<string, unknown>) => void,
  on: { socket: string; port: number } | null = null,
): Promise<Callback> {
  const secret = randomBytes(24).toString("base64url");
  const prefix = Buffer.from(`/${secret}/`);
  const ours = (path: string | undefined) => {
    const given = Buffer.from((path ?? "").slice(0, prefix.length));
    return given.length === prefix.length && timingSafeEqual(given, prefix);
  };
  const server: Server = createServer((req, res) => {
    if (!ours(req.url)) {
      req.resume();
      res.writeHead(404).end();
      return;
    }
    if (req.method !== "POST") {
      res.writeHead(405).end();
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_BODY) chunks.push(chunk);
    });
    req.on("end", () => {
      if (size > MAX_BODY) {
        res.writeHead(413).end();
        return;
      }
      try {
        onEvent(webhookToEvent(JSON.parse(Buffer.concat(chunks).toString("utf8"))));
        res.writeHead(204).end();
      } catch {
        res.writeHead(400, { "content-type": "text/plain" }).end("expected a JSON body");
      }
    });
  });
  let port: number;
  if (on) {
    await new Promise<void>((resolve, reject) => (server.once("error", reject), server.listen(on.socket, resolve)));
    chmodSync(on.socket, 0o666); // the trainer may run as another user (run_as); the secret guards it
    port = on.port;
  } else {
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    port = (server.address() as AddressInfo).port;
  }
  return {
    url: `http://127.0.0.1:${port}/${secret}/`,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
