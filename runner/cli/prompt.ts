import { createInterface } from "node:readline/promises";

/** Whether questions can be asked: stdin is a terminal a person types on. */
export function canPrompt(stdin: NodeJS.ReadStream = process.stdin): boolean {
  return Boolean(stdin.isTTY);
}

/**
 * Asks one line on the terminal (the question on stderr, so stdout stays data); an empty answer
 * takes `fallback`.
 *
 * @example
 * const url = await ask("Service URL", "http://localhost:8001");
 */
export async function ask(question: string, fallback?: string): Promise<string> {
  const lines = createInterface({ input: process.stdin, output: process.stderr, terminal: true });
  try {
    const answer = (await lines.question(`${question}${fallback ? ` [${fallback}]` : ""}: `)).trim();
    return answer || fallback || "";
  } finally {
    lines.close();
  }
}

/**
 * Asks for a secret on the terminal without echoing it: stdin in raw mode, read key by key.
 * Backspace erases; Ctrl-C or Ctrl-D on an empty line cancels (an Error).
 */
export function askSecret(
  question: string,
  stdin: NodeJS.ReadStream = process.stdin,
  stderr: NodeJS.WriteStream = process.stderr,
): Promise<string> {
  return new Promise((resolve, reject) => {
    let secret = "";
    const wasRaw = stdin.isRaw;
    const finish = (error: Error | null) => {
      stdin.off("data", onData);
      stdin.setRawMode(wasRaw);
      stdin.pause();
      stderr.write("\n");
      if (error) reject(error);
      else resolve(secret);
    };
    const onData = (chunk: Buffer) => {
      for (const char of chunk.toString("utf8")) {
        if (char === "\r" || char === "\n") return finish(null);
        if (char === "\u0003" || (char === "\u0004" && !secret)) return finish(new Error("cancelled"));
        if (char === "\u007f" || char === "\b") secret = secret.slice(0, -1);
        else if (char >= " ") secret += char;
      }
    };
    // Raw before the question shows, so nothing typed after it is echoed by the terminal.
    stdin.setRawMode(true);
    stderr.write(`${question}: `);
    stdin.resume();
    stdin.on("data", onData);
  });
}

/**
 * All of stdin as text, with one final newline removed (`echo $PW | jobs login --password-stdin`),
 * as `docker login --password-stdin` reads it.
 */
export async function readStdin(stdin: NodeJS.ReadableStream = process.stdin): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stdin) chunks.push(typeof chunk === "string" ? Buffer.from(chunk) : chunk);
  return Buffer.concat(chunks)
    .toString("utf8")
    .replace(/\r?\n$/, "");
}
