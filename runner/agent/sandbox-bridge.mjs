// The first program in a sandbox with a network namespace of its own (runner/agent/sandbox.ts), where
// nothing but loopback exists: it listens on 127.0.0.1:<port> for each of the job's gateway
// sockets and hands every connection to it (the runner's callback, the job's egress proxy, the
// edge), then runs the trainer as its child and ends as the trainer ends - with its exit code, or
// of the same signal. Plain JavaScript, run by plain node, so it costs no TypeScript loader.
//
//   node sandbox-bridge.mjs '[{"port":47001,"socket":"/tmp/.service-net/callback.sock"}]' -- <trainer argv...>
import { spawn } from "node:child_process";
import { connect, createServer } from "node:net";

// How the runner tells it from the trainer (its signals go to the trainer, never to the bridge).
process.title = "sandbox-bridge";
const [spec, separator, ...argv] = process.argv.slice(2);
if (!spec || separator !== "--" || argv.length === 0) {
  console.error("usage: sandbox-bridge.mjs '<[{port, socket}]>' -- <program> [args...]");
  process.exit(2);
}

try {
  await Promise.all(
    JSON.parse(spec).map(
      ({ port, socket }) =>
        new Promise((listening, failed) => {
          const server = createServer((client) => {
            const upstream = connect(socket);
            client.pipe(upstream).pipe(client);
            client.on("error", () => upstream.destroy());
            upstream.on("error", () => client.destroy());
          });
          server.once("error", failed);
          server.listen(port, "127.0.0.1", () => listening(undefined));
        }),
    ),
  );
} catch (error) {
  console.error(`sandbox-bridge: cannot listen inside the sandbox: ${error.message}`);
  process.exit(126);
}

// The runner signals the trainer's own processes; a signal that reaches the bridge anyway (the
// terminal's) must not end it before the trainer.
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT"]) process.on(signal, () => {});
const child = spawn(argv[0], argv.slice(1), { stdio: "inherit" });
child.on("error", (error) => {
  console.error(`${argv[0]}: ${error.message}`);
  process.exit(error.code === "ENOENT" ? 127 : 126);
});
child.on("exit", (code, signal) => {
  if (signal) {
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
  } else process.exit(code ?? 1);
});
