import { createServer, type AddressInfo } from "node:net";

/** A TCP port free on loopback right now, for a server a test starts and restarts on the same address. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  const { port } = server.address() as AddressInfo;
  await new Promise((done) => server.close(done));
  return port;
}
