// `npm run bench:notify`: notification delivery on the local stack (`npm start`'s process, its
// own runner training the demo trainer), with an SMTP sink and two webhook sinks started here
// (test/helpers/sinks.ts). The admin wants job.completed and approval.needed on every channel
// (a signed webhook, a Slack-compatible webhook, e-mail).
//  1. BENCH_NOTIFY_JOBS (20) demo jobs of 4 steps, two at a time: from each job's completed_at
//     (the transition, as the API records it) to each channel's sink receiving its message.
//  2. BENCH_NOTIFY_APPROVALS (20) submissions that need approval: from each job's queued_at (it
//     is stored blocked) to each channel's sink receiving the approval.needed message.
// Figures: p50, p95 and max per kind and channel, and the p95 over all (target <= 5 s).
import { startHttpSink, startSmtpSink, mailParts, type HttpSink } from "../helpers/sinks";
import { until } from "../helpers/wait";
import { fmt, startBenchStack } from "./lib";

const jobs = Number(process.env.BENCH_NOTIFY_JOBS ?? 20);
const approvals = Number(process.env.BENCH_NOTIFY_APPROVALS ?? 20);
const out = (line: string) => process.stdout.write(line + "\n");

const quantile = (values: number[], q: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
};

async function main(): Promise<void> {
  const [stack, smtp, hook, slack] = await Promise.all([
    startBenchStack({ localRunner: true }),
    startSmtpSink(),
    startHttpSink(),
    startHttpSink(),
  ]);
  const call = async (method: string, path: string, body?: unknown) => {
    const response = await fetch(stack.base + path, {
      method,
      headers: { "x-api-key": stack.adminKey, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    if (response.status >= 300) throw new Error(`${method} ${path}: ${response.status} ${text}`);
    return text ? JSON.parse(text) : null;
  };
  try {
    await call("PUT", "/api/admin/webhooks", { allow_private_targets: true });
    await call("PUT", "/api/admin/notifications/smtp", {
      host: "127.0.0.1",
      port: smtp.port,
      tls: "none",
      username: "",
      from: "bench@example.com",
    });
    await call("PUT", "/api/users/me/notifications", {
      kinds: ["job.completed", "approval.needed"],
      channels: { webhook: { url: `${hook.url}/in` }, slack: { url: `${slack.url}/in` }, email: { address: "bench@example.com" } },
    });
    await call("POST", "/api/configs/environments", { name: "quick", from_example: "demo" });
    const { config } = await call("GET", "/api/configs/quick");
    await call("PUT", "/api/configs/quick", {
      config: { ...config, "--max_train_steps": 4, "--demo_step_ms": 10, "--validation_steps": 0, "--checkpointing_steps": 0 },
    });
    await call("POST", "/api/queue/concurrency", { local_job_max_concurrent: 2 });

    // The moment each sink received the message about a job, by channel.
    // The signed webhook names its kind; the Slack text and the e-mail's subject its headline.
    const headline = (kind: string) => (kind === "job.completed" ? ": completed" : "needs an admin's approval");
    const webhookAt = (sink: HttpSink, kind: string, jobId: string) =>
      sink.requests.find((r) => (r.body.includes(`"${kind}"`) || r.body.includes(headline(kind))) && r.body.includes(jobId))?.at;
    const mailAt = (kind: string, jobId: string) =>
      smtp.mails.find((m) => mailParts(m.data).text.includes(jobId) && mailParts(m.data).subject.includes(headline(kind)))?.at;
    const latencies = new Map<string, number[]>();
    const measure = async (kind: string, jobId: string, transitionAt: number) => {
      const at = await until(
        `${kind} for ${jobId} on every channel`,
        () => {
          const times = [webhookAt(hook, kind, jobId), webhookAt(slack, kind, jobId), mailAt(kind, jobId)];
          return times.every((x) => x !== undefined) && (times as number[]);
        },
        { timeoutMs: 120_000 },
      );
      ["webhook", "slack", "email"].forEach((channel, i) => {
        const key = `${kind} ${channel}`;
        latencies.set(key, [...(latencies.get(key) ?? []), at[i]! - transitionAt]);
      });
    };

    out(`1. ${jobs} demo jobs, two at a time: job completed -> delivered`);
    const ids: string[] = [];
    for (let i = 0; i < jobs; i++) ids.push((await call("POST", "/api/queue/submit", { config_name: "quick" })).job_id);
    for (const id of ids) {
      const job = await until(
        `${id} to complete`,
        async () => {
          const j = await call("GET", `/api/queue/jobs/${id}`);
          if (j.status === "failed" || j.status === "cancelled") throw new Error(`${id} ${j.status}: ${j.error_message}`);
          return j.status === "completed" && j;
        },
        { timeoutMs: 300_000, everyMs: 200 },
      );
      await measure("job.completed", id, Date.parse(job.completed_at));
    }

    out(`2. ${approvals} submissions needing approval: stored blocked -> delivered`);
    await call("PUT", "/api/queue/approval-rules", { local_gpu_threshold: 0 });
    await call("POST", "/api/configs/environments", { name: "one-gpu" });
    await call("PUT", "/api/configs/one-gpu", { config: { "--num_processes": 1 } });
    for (let i = 0; i < approvals; i++) {
      const { job_id } = await call("POST", "/api/queue/submit", { config_name: "one-gpu" });
      const job = await call("GET", `/api/queue/jobs/${job_id}`);
      await measure("approval.needed", job_id, Date.parse(job.queued_at));
      await call("POST", `/api/queue/${job_id}/reject?reason=bench`);
    }

    out("");
    out("kind and channel                 n    p50 (s)  p95 (s)  max (s)");
    const all: number[] = [];
    for (const [key, values] of latencies) {
      all.push(...values);
      out(
        `${key.padEnd(30)} ${String(values.length).padStart(3)} ${fmt(quantile(values, 0.5) / 1000, 2)} ${fmt(quantile(values, 0.95) / 1000, 2)} ${fmt(Math.max(...values) / 1000, 2)}`,
      );
    }
    const p95 = quantile(all, 0.95) / 1000;
    out("");
    out(`delivery p95 over all ${all.length} messages: ${p95.toFixed(2)} s (target <= 5 s: ${p95 <= 5 ? "met" : "missed"})`);
    const records = (await call("GET", "/api/users/me/notifications/deliveries?limit=200")).deliveries as {
      status: string;
      attempts: number;
    }[];
    out(
      `deliveries recorded: ${records.length}, delivered ${records.filter((d) => d.status === "delivered").length}, retried ${records.filter((d) => d.attempts > 1).length}`,
    );
  } finally {
    await Promise.all([stack.stop(), smtp.close(), hook.close(), slack.close()]);
  }
}

await main();
