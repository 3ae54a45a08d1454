import * as pty from "node-pty";
import { afterEach, describe, expect, it, vi } from "vitest";
import { keepOutputUntilRead } from "../../runner/agent/pty-drain";

// A trainer that prints its last events and exits at once, read by a runner too busy to keep up.
const PRINT_THEN_EXIT = "process.stdout.write('x'.repeat(300000) + '\\nEND\\n')";

function run(program = PRINT_THEN_EXIT, busy = true): Promise<{ received: string; bytes: number }> {
  const child = pty.spawn(process.execPath, ["-e", program], {
    name: "xterm-256color",
    cols: 400,
    rows: 50,
    cwd: process.cwd(),
    env: process.env,
  });
  let received = "";
  const take = (data: string) => {
    received += data;
    if (!busy) return;
    const until = Date.now() + 30; // a busy event loop: each chunk costs 30 ms
    while (Date.now() < until);
  };
  child.onData(take);
  keepOutputUntilRead(child, take);
  return new Promise((resolve) => child.onExit(() => resolve({ received, bytes: received.length })));
}

describe("a trainer's last output (runner/agent/pty-drain.ts)", () => {
  afterEach(() => void vi.useRealTimers());

  it("reaches the runner in full before the exit, even when the runner reads slowly", async () => {
    const { received, bytes } = await run();
    expect(received.endsWith("END\r\n")).toBe(true);
    expect(bytes).toBe(300000 + "\r\nEND\r\n".length);
  });

  it("is read and the exit reported without node-pty's 200 ms timer: the exit comes even when no timer ever fires", async () => {
    // node-pty arms a 200 ms timer when the process exits and, left alone, reports the exit only
    // when it fires; with timers frozen, the exit must come from the drain itself.
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "setInterval", "clearInterval"] });
    const lines = Array.from({ length: 500 }, (_, i) => `line ${i}`);
    const { received } = await run(`process.stdout.write(${JSON.stringify(lines.join("\n") + "\n")}); process.exit(0)`, false);
    expect(received).toBe(lines.join("\r\n") + "\r\n");
  });
});
