// E-mail over TLS (issue 30, Build 4): the service's SMTP client (edge/notifications/smtp.ts, on the
// Workers runtime's connect()) against SMTP sinks started here that speak implicit TLS and
// STARTTLS (RFC 3207, AUTH offered only after it, as submission servers do), over real HTTP
// against the real stack through the admin's test-send and a job's notification. The sinks'
// self-signed certificate is trusted the way an operator trusts a private CA: workerd reads
// SSL_CERT_FILE at start. Attackers: a server whose certificate is not trusted gets no message and
// no password (the handshake fails, said in the answer); a server that drops STARTTLS from its
// features (a downgrade) gets no AUTH and no message.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mailParts, startSmtpSink, type SmtpSink } from "../helpers/sinks";
import { createUserWithKey, setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";
import { selfSignedCert } from "../helpers/tls";
import { until } from "../helpers/wait";

const trusted = selfSignedCert();
const untrusted = selfSignedCert();
let t: TestStack;
let admin: { key: string; cookie: string };
let rita: { key: string; id: number };
const sinks: SmtpSink[] = [];
const sink = async (options: Parameters<typeof startSmtpSink>[0]) => {
  const s = await startSmtpSink(options);
  sinks.push(s);
  return s;
};
const as = (key: string) => ({ auth: { key } });
const smtpSettings = (port: number, tls: "tls" | "starttls" | "none") => ({
  host: "127.0.0.1",
  port,
  tls,
  username: "mailer",
  password: "s3cret-pass",
  from: "jobs@example.com",
});
async function configure(port: number, tls: "tls" | "starttls" | "none") {
  const saved = await t.call("PUT", "/api/admin/notifications/smtp", { json: smtpSettings(port, tls), ...as(admin.key) });
  expect(saved.status, saved.text).toBe(200);
}
const testSend = async (to: string) =>
  (await t.call("POST", "/api/admin/notifications/smtp/test", { json: { to }, ...as(admin.key) })).body as {
    sent: boolean;
    error: string | null;
  };

beforeAll(async () => {
  // workerd (started by the stack) trusts the system's CAs and the file SSL_CERT_FILE names.
  const before = process.env.SSL_CERT_FILE;
  process.env.SSL_CERT_FILE = trusted.certFile;
  try {
    t = await startTestStack();
  } finally {
    if (before === undefined) delete process.env.SSL_CERT_FILE;
    else process.env.SSL_CERT_FILE = before;
  }
  admin = await setUpAdmin(t);
  rita = await createUserWithKey(t, { key: admin.key }, "researcher", "rita");
  expect((await t.call("PUT", "/api/admin/webhooks", { json: { allow_private_targets: true }, ...as(admin.key) })).status).toBe(200);
}, 120_000);
afterAll(async () => {
  for (const s of sinks) await s.close();
  await t?.stop();
});

describe("SMTP over TLS", () => {
  it("implicit TLS (`tls`): the test message arrives encrypted, authenticated as the configured user", async () => {
    const smtp = await sink({ tls: "tls", cert: trusted });
    await configure(smtp.port, "tls");
    expect(await testSend("ops@example.com")).toEqual({ sent: true, error: null });
    expect(smtp.mails).toHaveLength(1);
    expect(smtp.mails[0]).toMatchObject({ secure: true, user: "mailer", from: "jobs@example.com", to: ["ops@example.com"] });
    expect(mailParts(smtp.mails[0]!.data).subject).toBe("[training] SMTP test");
  });

  it("STARTTLS (`starttls`): upgraded before AUTH, and a decided approval's e-mail goes the same way", async () => {
    const smtp = await sink({ tls: "starttls", cert: trusted });
    await configure(smtp.port, "starttls");
    expect(await testSend("ops@example.com")).toEqual({ sent: true, error: null });
    expect(smtp.mails[0]).toMatchObject({ secure: true, user: "mailer", to: ["ops@example.com"] });

    // rita hears of decided approvals by e-mail: her job waits for approval, and the admin rejects it.
    const saved = await t.call("PUT", "/api/users/me/notifications", {
      json: { kinds: ["approval.decided"], channels: { webhook: null, slack: null, email: { address: "rita@example.com" } } },
      ...as(rita.key),
    });
    expect(saved.status, saved.text).toBe(200);
    expect((await t.call("POST", "/api/configs/environments", { json: { name: "one-gpu" }, ...as(admin.key) })).status).toBe(201);
    expect((await t.call("PUT", "/api/configs/one-gpu", { json: { config: { "--num_processes": 1 } }, ...as(admin.key) })).status).toBe(
      200,
    );
    expect((await t.call("PUT", "/api/queue/approval-rules", { json: { local_gpu_threshold: 0 }, ...as(admin.key) })).status).toBe(200);
    const job = await t.call("POST", "/api/queue/submit", { json: { config_name: "one-gpu" }, ...as(rita.key) });
    expect(job.body.status, job.text).toBe("blocked");
    const rejected = await t.call("POST", `/api/queue/${job.body.job_id}/reject?reason=not%20now`, { json: {}, ...as(admin.key) });
    expect(rejected.status, rejected.text).toBe(200);
    await until("rita's e-mail over STARTTLS", () => smtp.mails.some((m) => m.to[0] === "rita@example.com"));
    const mail = smtp.mails.find((m) => m.to[0] === "rita@example.com")!;
    expect(mail).toMatchObject({ secure: true, user: "mailer" });
    expect(mailParts(mail.data).text).toContain("Decision: rejected");
  });

  it("refuses a server whose certificate is not trusted: no message, the answer names the failure", async () => {
    for (const mode of ["tls", "starttls"] as const) {
      const smtp = await sink({ tls: mode, cert: untrusted });
      await configure(smtp.port, mode);
      const answer = await testSend("ops@example.com");
      expect(answer.sent, mode).toBe(false);
      expect(answer.error, mode).toBeTruthy();
      expect(smtp.connections, mode).toBe(1);
      expect(smtp.mails, mode).toEqual([]);
    }
  });

  it("refuses to go on in plain text when a `starttls` server offers no STARTTLS (a downgrade): no AUTH, no message", async () => {
    const plain = await sink({});
    await configure(plain.port, "starttls");
    expect(await testSend("ops@example.com")).toEqual({ sent: false, error: "127.0.0.1 does not offer STARTTLS" });
    expect(plain.connections).toBe(1);
    expect(plain.mails).toEqual([]);
  });
});
