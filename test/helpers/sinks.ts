import { createServer as createHttpServer, type Server as HttpServer } from "node:http";
import { createServer as createTcpServer, type AddressInfo, type Server as TcpServer, type Socket } from "node:net";
import { createServer as createTlsServer, TLSSocket } from "node:tls";

/*
 * Receivers for notification tests and the bench: an SMTP sink speaking enough of RFC 5321 for
 * the service's client (EHLO with AUTH PLAIN, AUTH, MAIL, RCPT, DATA with dot-unstuffing, RSET,
 * NOOP, QUIT), in plain text, over implicit TLS (`tls`), or offering STARTTLS (RFC 3207: after
 * it, the session starts over on the encrypted socket and AUTH is offered only there, as real
 * submission servers do); and an HTTP sink that keeps every request and answers with the status
 * its script says.
 */

export interface ReceivedMail {
  from: string;
  to: string[];
  /** The message as sent (headers and body), dot-unstuffed. */
  data: string;
  /** AUTH PLAIN's user, when the client authenticated. */
  user: string | null;
  /** Whether the message came over TLS (implicit, or after STARTTLS). */
  secure: boolean;
  at: number;
}

export interface SmtpSink {
  port: number;
  mails: ReceivedMail[];
  /** Connections accepted, whatever became of them (a refused TLS handshake counts). */
  connections: number;
  close(): Promise<void>;
}

export interface SmtpSinkOptions {
  /** Answer RCPT TO with 550 (a permanent refusal). */
  rejectRcpt?: boolean;
  /** `tls`: TLS from the first byte; `starttls`: plain until the client asks for STARTTLS. Needs `cert`. */
  tls?: "tls" | "starttls";
  cert?: { key: Buffer; cert: Buffer };
}

/**
 * Starts an SMTP sink on a free loopback port.
 *
 * @example
 * const smtp = await startSmtpSink(); // set the service's SMTP to 127.0.0.1:smtp.port, tls "none"
 * const secure = await startSmtpSink({ tls: "starttls", cert }); // tls "starttls", with `cert` trusted
 */
export async function startSmtpSink(options: SmtpSinkOptions = {}): Promise<SmtpSink> {
  if (options.tls && !options.cert) throw new Error("an SMTP sink with TLS needs a certificate");
  const mails: ReceivedMail[] = [];
  const sockets = new Set<Socket>();
  const sink = { connections: 0 };
  const serve = (socket: Socket, secure: boolean) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => undefined);
    let buffer = "";
    let inData = false;
    let data: string[] = [];
    let mail: Omit<ReceivedMail, "data" | "at"> = { from: "", to: [], user: null, secure };
    const say = (line: string) => socket.write(line + "\r\n");
    const offerStartTls = options.tls === "starttls" && !secure;
    const onData = (chunk: Buffer) => {
      buffer += chunk.toString("utf8");
      let end: number;
      while ((end = buffer.indexOf("\r\n")) >= 0) {
        const line = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        if (inData) {
          if (line === ".") {
            inData = false;
            mails.push({ ...mail, data: data.join("\r\n"), at: Date.now() });
            data = [];
            mail = { from: "", to: [], user: mail.user, secure };
            say("250 2.0.0 queued");
          } else data.push(line.startsWith("..") ? line.slice(1) : line);
          continue;
        }
        const verb = line.slice(0, 4).toUpperCase();
        if (verb === "EHLO") {
          socket.write(
            offerStartTls ? "250-sink.test\r\n250-STARTTLS\r\n250 8BITMIME\r\n" : "250-sink.test\r\n250-AUTH PLAIN\r\n250 8BITMIME\r\n",
          );
        } else if (verb === "HELO") say("250 sink.test");
        else if (line.toUpperCase() === "STARTTLS" && offerStartTls) {
          say("220 2.0.0 ready to start TLS");
          // RFC 3207 4.2: the client starts over; nothing said before the handshake is kept.
          socket.removeListener("data", onData);
          const upgraded = new TLSSocket(socket, { isServer: true, key: options.cert!.key, cert: options.cert!.cert });
          upgraded.on("error", () => undefined);
          serveSecure(upgraded);
          return;
        } else if (verb === "AUTH") {
          const [, mechanism, initial] = line.split(" ");
          if (offerStartTls) say("530 5.7.0 must issue a STARTTLS command first");
          else if (mechanism?.toUpperCase() !== "PLAIN" || !initial) say("504 5.5.4 only AUTH PLAIN with an initial response");
          else {
            mail.user = Buffer.from(initial, "base64").toString("utf8").split("\0")[1] ?? null;
            say("235 2.7.0 authenticated");
          }
        } else if (verb === "MAIL") {
          mail.from = /<([^>]*)>/.exec(line)?.[1] ?? "";
          say("250 2.1.0 ok");
        } else if (verb === "RCPT") {
          if (options.rejectRcpt) say("550 5.1.1 no such user");
          else {
            mail.to.push(/<([^>]*)>/.exec(line)?.[1] ?? "");
            say("250 2.1.5 ok");
          }
        } else if (verb === "DATA") {
          inData = true;
          say("354 end with .");
        } else if (verb === "RSET" || verb === "NOOP") say("250 ok");
        else if (verb === "QUIT") {
          say("221 bye");
          socket.end();
        } else say("502 5.5.2 not implemented");
      }
    };
    socket.on("data", onData);
  };
  // The session on an encrypted socket: greeted only when implicit TLS (after STARTTLS the client sends EHLO first).
  const serveSecure = (socket: Socket) => serve(socket, true);
  const accept = (socket: Socket) => {
    sink.connections++;
    serve(socket, options.tls === "tls");
    socket.write("220 sink.test ESMTP ready\r\n");
  };
  const server: TcpServer =
    options.tls === "tls"
      ? createTlsServer({ key: options.cert!.key, cert: options.cert!.cert }, accept).on("tlsClientError", () => sink.connections++)
      : createTcpServer(accept);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as AddressInfo).port,
    mails,
    get connections() {
      return sink.connections;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/** The decoded text and HTML parts of a multipart/alternative message the service sent. */
export function mailParts(data: string): { subject: string; text: string; html: string } {
  const subject = /^Subject: (.*)$/m.exec(data)?.[1] ?? "";
  const part = (type: string) => {
    const match = new RegExp(
      `Content-Type: ${type}[^\\r\\n]*\\r\\nContent-Transfer-Encoding: base64\\r\\n\\r\\n([A-Za-z0-9+/=\\r\\n]+?)\\r\\n--`,
    ).exec(data);
    return match ? Buffer.from(match[1]!.replace(/\r\n/g, ""), "base64").toString("utf8") : "";
  };
  return { subject, text: part("text/plain"), html: part("text/html") };
}

export interface ReceivedRequest {
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  at: number;
}

export interface HttpSink {
  url: string;
  requests: ReceivedRequest[];
  /** The statuses to answer, in turn; once used up, 204. */
  script: number[];
  close(): Promise<void>;
}

/**
 * Starts an HTTP sink on a free loopback port (or `port`) that records every request.
 *
 * @example
 * const hook = await startHttpSink([500]); // the first request fails, the rest succeed
 */
export async function startHttpSink(script: number[] = [], port = 0): Promise<HttpSink> {
  const requests: ReceivedRequest[] = [];
  const sink = { script: [...script] };
  const server: HttpServer = createHttpServer((req, res) => {
    let body = "";
    req.on("data", (chunk) => (body += chunk));
    req.on("end", () => {
      requests.push({ path: req.url ?? "", headers: req.headers, body, at: Date.now() });
      res.writeHead(sink.script.shift() ?? 204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    get script() {
      return sink.script;
    },
    set script(value: number[]) {
      sink.script = value;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
