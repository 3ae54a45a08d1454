import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/*
 * Events in through webhooks (trainer protocol): SimpleTuner reports progress by POSTing "raw"
 * webhook JSON to the callback URLs in its --webhook_config. The runner gives each job's trainer
 * one such URL, on loopback, and turns every POST into an event. The job's own receivers are not
 * given to the trainer: the edge sends them the lifecycle (signed, retried), so nothing reaches
 * them twice or unsigned.
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

export async function startCallback(onEvent: (event: { type: string } & Record<string, unknown>) => void): Promise<Callback> {
  const server: Server = createServer((req, res) => {
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
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/`,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
