import { connect, createServer, type AddressInfo, type Socket } from "node:net";

/**
 * A TCP proxy between a runner and the edge that a test can cut, as a network partition does:
 * cut, it forwards nothing in either direction and answers nothing - connections already open
 * hang, new ones are accepted and hang (no reset: the runner learns of it only by its timeouts);
 * healed, new connections go through again (the hung ones are closed).
 *
 * @example
 * const proxy = await tcpProxy(new URL(t.base).port);
 * spawnRunner(proxy.url, token, [...]); proxy.cut(); ...; proxy.heal();
 */
export async function tcpProxy(targetPort: number | string, targetHost = "127.0.0.1") {
  let cut = false;
  const pairs = new Set<{ client: Socket; upstream: Socket | null }>();
  const server = createServer((client) => {
    const pair: { client: Socket; upstream: Socket | null } = { client, upstream: null };
    pairs.add(pair);
    client.on("error", () => {});
    client.on("close", () => {
      pair.upstream?.destroy();
      pairs.delete(pair);
    });
    if (cut) return; // accepted, never answered
    const upstream = connect(Number(targetPort), targetHost);
    pair.upstream = upstream;
    upstream.on("error", () => client.destroy());
    upstream.on("close", () => !cut && client.destroy());
    client.on("data", (data) => !cut && upstream.write(data));
    upstream.on("data", (data) => !cut && client.write(data));
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    /** From now on nothing passes: open connections hang, new ones are accepted and hang. */
    cut() {
      cut = true;
    },
    /** Traffic passes again; the connections that hung while cut are closed. */
    heal() {
      cut = false;
      for (const pair of pairs) {
        pair.client.destroy();
        pair.upstream?.destroy();
      }
    },
    close() {
      for (const pair of pairs) {
        pair.client.destroy();
        pair.upstream?.destroy();
      }
      return new Promise<void>((done) => server.close(() => done()));
    },
  };
}
