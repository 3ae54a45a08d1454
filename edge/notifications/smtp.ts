import { connect } from "cloudflare:sockets";
import type { SmtpConfig } from "../settings-store";

/*
 * A minimal SMTP client (RFC 5321) over the Workers runtime's TCP sockets (`connect()` from
 * cloudflare:sockets): EHLO, STARTTLS or TLS from the first byte, AUTH PLAIN, MAIL FROM, RCPT
 * TO, DATA with dot-stuffing, QUIT. Written here because the npm SMTP clients (nodemailer and
 * its kin) need node:net and node:tls, which workerd does not have, and no Worker-native mail
 * client is among this project's dependencies. One message per connection: notifications are
 * few, and a connection per message keeps a failure confined to its message.
 */

export interface MailMessage {
  to: string;
  subject: string;
  text: string;
  html: string;
}

/** An SMTP answer that is not what the step expects: `permanent` for a 5xx (retrying will not help). */
export class SmtpError extends Error {
  constructor(
    message: string,
    readonly permanent: boolean,
  ) {
    super(message);
  }
}

const encoder = new TextEncoder();
const CRLF = "\r\n";

/** Reads SMTP replies (possibly multi-line, `250-...` then `250 ...`) from a socket's readable side. */
class ReplyReader {
  private buffer = "";
  private readonly decoder = new TextDecoder();
  constructor(private reader: ReadableStreamDefaultReader<Uint8Array>) {}

  /** Lets go of the socket's stream (startTls() refuses a socket whose streams are locked). */
  release(): void {
    this.reader.releaseLock();
  }

  swap(reader: ReadableStreamDefaultReader<Uint8Array>): void {
    this.reader = reader;
    this.buffer = "";
  }

  async reply(): Promise<{ code: number; text: string }> {
    const lines: string[] = [];
    for (;;) {
      const end = this.buffer.indexOf("\n");
      if (end < 0) {
        const { value, done } = await this.reader.read();
        if (done) throw new SmtpError("the server closed the connection", false);
        this.buffer += this.decoder.decode(value, { stream: true });
        continue;
      }
      const line = this.buffer.slice(0, end).replace(/\r$/, "");
      this.buffer = this.buffer.slice(end + 1);
      lines.push(line);
      if (line.length < 4 || line[3] !== "-") return { code: Number(line.slice(0, 3)), text: lines.join("\n") };
    }
  }
}

/** RFC 2047 encoded-word for a header value that is not plain ASCII. */
function headerText(value: string): string {
  const clean = value.replace(/[\r\n]+/g, " ");
  if (/^[\x20-\x7e]*$/.test(clean)) return clean;
  return `=?UTF-8?B?${btoa(String.fromCharCode(...encoder.encode(clean)))}?=`;
}

/** Base64 of UTF-8 text, in lines of 76 characters. */
function base64Lines(text: string): string {
  const bytes = encoder.encode(text);
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return (btoa(binary).match(/.{1,76}/g) ?? []).join(CRLF);
}

/** The message as RFC 5322 text: multipart/alternative with a text and an HTML part. */
export function formatMessage(from: string, message: MailMessage, now = new Date()): string {
  const boundary = `b_${crypto.randomUUID().replace(/-/g, "")}`;
  const domain = from.split("@")[1] ?? "localhost";
  return [
    `From: ${from}`,
    `To: ${message.to}`,
    `Subject: ${headerText(message.subject)}`,
    `Date: ${now.toUTCString()}`,
    `Message-ID: <${crypto.randomUUID()}@${domain}>`,
    "MIME-Version: 1.0",
    `Content-Type: multipart/alternative; boundary="${boundary}"`,
    "",
    `--${boundary}`,
    'Content-Type: text/plain; charset="utf-8"',
    "Content-Transfer-Encoding: base64",
    "",
    base64Lines(message.text),
    `--${boundary}`,
    'Content-Type: text/html; charset="utf-8"',
    "Content-Transfer-Encoding: base64",
    "",
    base64Lines(message.html),
    `--${boundary}--`,
    "",
  ].join(CRLF);
}

/**
 * Sends one message through the configured SMTP server; throws SmtpError (or a socket error) on
 * failure. The whole exchange is bounded by `timeoutMs`.
 *
 * @example
 * await sendMail(settings, { to: "bea@example.com", subject: "Job done", text: "...", html: "<p>...</p>" });
 */
export async function sendMail(config: SmtpConfig, message: MailMessage, timeoutMs = 15_000): Promise<void> {
  const socket = connect(
    { hostname: config.host, port: config.port },
    { secureTransport: config.tls === "tls" ? "on" : config.tls === "starttls" ? "starttls" : "off", allowHalfOpen: false },
  );
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new SmtpError(`no answer from ${config.host}:${config.port} within ${timeoutMs / 1000} s`, false)),
      timeoutMs,
    );
  });
  try {
    await Promise.race([converse(socket, config, message), timeout]);
  } finally {
    clearTimeout(timer);
    await socket.close().catch(() => undefined);
  }
}

type Socket = ReturnType<typeof connect>;

async function converse(first: Socket, config: SmtpConfig, message: MailMessage): Promise<void> {
  let socket = first;
  let writer = socket.writable.getWriter();
  const replies = new ReplyReader(socket.readable.getReader());
  const expect = async (step: string, ...codes: number[]) => {
    const { code, text } = await replies.reply();
    if (!codes.includes(code)) throw new SmtpError(`${step}: ${text}`, code >= 500);
    return text;
  };
  const send = async (line: string, step: string, ...codes: number[]) => {
    await writer.write(encoder.encode(line + CRLF));
    return expect(step, ...codes);
  };
  const heloName = (config.from.split("@")[1] ?? "localhost").replace(/[^A-Za-z0-9.-]/g, "");

  await expect("greeting", 220);
  let features = await send(`EHLO ${heloName}`, "EHLO", 250);
  if (config.tls === "starttls") {
    if (!/\bSTARTTLS\b/i.test(features)) throw new SmtpError(`${config.host} does not offer STARTTLS`, true);
    await send("STARTTLS", "STARTTLS", 220);
    writer.releaseLock();
    replies.release();
    socket = socket.startTls();
    writer = socket.writable.getWriter();
    replies.swap(socket.readable.getReader());
    features = await send(`EHLO ${heloName}`, "EHLO after STARTTLS", 250);
  }
  if (config.username) {
    if (!/\bAUTH\b[^\n]*\bPLAIN\b/i.test(features)) throw new SmtpError(`${config.host} does not offer AUTH PLAIN`, true);
    const plain = btoa(String.fromCharCode(...encoder.encode(`\0${config.username}\0${config.password}`)));
    await send(`AUTH PLAIN ${plain}`, "AUTH", 235);
  }
  await send(`MAIL FROM:<${config.from}>`, "MAIL FROM", 250);
  await send(`RCPT TO:<${message.to}>`, "RCPT TO", 250, 251);
  await send("DATA", "DATA", 354);
  // Dot-stuffing (RFC 5321 4.5.2): a line starting with "." gets another.
  const data = formatMessage(config.from, message).replace(/\r\n\./g, "\r\n..");
  await writer.write(encoder.encode(data + "." + CRLF));
  await expect("message", 250);
  await writer.write(encoder.encode("QUIT" + CRLF));
  writer.releaseLock();
}
