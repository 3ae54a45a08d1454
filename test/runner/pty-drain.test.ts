import * as pty from "node-pty";
import { describe, expect, it } from "vitest";
import { keepOutputUntilRead } from "../../runner/agent/pty-drain";

// A trainer that prints its last events and exits at once, read by a runner too busy to keep up.
const PRINT_THEN_EXIT = "process.stdout.write('x'.repeat(300000) + '\\nEND\\n')";

function run(): Promise<{ received: string; bytes: number }> {
  const child = pty.spawn(process.execPath, ["-e", PRINT_THEN_EXIT], {
    name: "xterm-256color",
    cols: 400,
    rows: 50,
    cwd: process.cwd(),
    env: process.env,
  });
  let received = "";
  const take = (data: string) => {
    received += data;
    const until = Date.now() + 30; // a busy event loop: each chunk costs 30 ms
    while (Date.now() < until);
  };
  child.onData(take);
  keepOutputUntilRead(child, take);
  return new Promise((resolve) => child.onExit(() => resolve({ received, bytes: received.length })));
}

describe("a trainer's last output (runner/agent/pty-drain.ts)", () => {
  it("reaches the runner in full before the exit, even when the runner reads slowly", async () => {
    const { received, bytes } = await run();
    expect(received.endsWith("END\r\n")).toBe(true);
    expect(bytes).toBe(300000 + "\r\nEND\r\n".length);
  });
});
