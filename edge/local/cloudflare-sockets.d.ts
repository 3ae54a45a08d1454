/*
 * The Workers runtime's TCP sockets, as far as edge/notifications/smtp.ts uses them, for the Node
 * type check only (the Worker's own check has @cloudflare/workers-types). Node code never loads
 * that module: edge/notifications/deliveries.ts imports the SMTP client only when it sends mail.
 */
declare module "cloudflare:sockets" {
  interface WorkerSocket {
    readonly readable: ReadableStream<Uint8Array>;
    readonly writable: WritableStream<Uint8Array>;
    close(): Promise<void>;
    startTls(): WorkerSocket;
  }
  export function connect(
    address: { hostname: string; port: number },
    options?: { secureTransport?: "on" | "off" | "starttls"; allowHalfOpen?: boolean },
  ): WorkerSocket;
}
