// `npm run bench:cloud`: how long a cloud submission takes to reach the provider, through the real
// stack (`npm start`'s process) and the fake Replicate of the tests (test/fakes/fake-replicate.ts).
// For each submission (consent Always Allow, free capacity): from sending POST /api/cloud/jobs/submit
//  1. to its answer;
//  2. to the provider's first call: POST /v1/files, the dataset archive (10 small images) starting
//     to arrive - admission, packaging from R2 and the outbound layer;
//  3. to the training being created at the provider (POST .../trainings), after the upload.
// Settings: BENCH_JOBS (20).
import { startFakeReplicate } from "../fakes/fake-replicate";
import { fmt, percentiles, startBenchStack } from "./lib";

const jobs = Number(process.env.BENCH_JOBS ?? 20);
const TOKEN = "r8_benchtoken0123456789abcdef";
const out = (line: string) => process.stdout.write(line + "\n");
const now = () => performance.timeOrigin + performance.now();
const PNG = Buffer.from(
  "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8cfc0f01f0005000201a5e2b3b40000000049454e44ae426082",
  "hex",
);

async function main(): Promise<void> {
  // Trainings end quickly so the cloud pool (max_concurrent) never fills.
  const fake = await startFakeReplicate({ token: TOKEN, sendWebhooks: false, run: { startingMs: 50, processingMs: 200, logEveryMs: 100 } });
  const stack = await startBenchStack({ env: { REPLICATE_API_TOKEN: TOKEN } });
  try {
    const call = async (method: string, path: string, body: unknown) => {
      const reply = await fetch(stack.base + path, {
        method,
        headers: { "content-type": "application/json", "x-api-key": stack.adminKey },
        body: JSON.stringify(body),
      });
      if (!reply.ok) throw new Error(`${method} ${path}: ${reply.status} ${await reply.text()}`);
      return reply.json() as Promise<Record<string, any>>;
    };
    await call("PUT", "/api/cloud/providers/replicate", {
      api_base_url: fake.url,
      allow_private_targets: true,
      training_model: "bench/trainer:0123456789abcdef",
      // A model the token's account (the fake's "acme") owns: Replicate needs one, never the trainer itself.
      training_destination: "acme/bench",
      s3_endpoint_enabled: true,
    });
    await call("PUT", "/api/cloud/settings", { consent_mode: "allow", public_url: stack.base, poll_interval_seconds: 1 });
    await call("POST", "/api/queue/concurrency", { max_concurrent: 1000, user_max_concurrent: 1000 });
    await call("PUT", "/api/queue/approval-rules", { cloud_cost_threshold: null });
    for (const name of ["withdata", "nodata"])
      await call("POST", "/api/configs/environments", { name, model_family: "flux", model_type: "lora" });
    const form = new FormData();
    form.set("target_path", "withdata");
    for (let i = 0; i < 10; i++) form.append("files[]", new Blob([new Uint8Array(PNG)]), `${i}.png`);
    const uploaded = await fetch(`${stack.base}/api/datasets/upload`, {
      method: "POST",
      headers: { "x-api-key": stack.adminKey },
      body: form,
    });
    if (uploaded.status !== 201) throw new Error(`dataset upload: ${uploaded.status}`);

    {
      const kind = "withdata";
      const answered: number[] = [];
      const firstCall: number[] = [];
      const created: number[] = [];
      for (let i = 0; i < jobs; i++) {
        const seen = fake.requests.length;
        const start = now();
        await call("POST", "/api/cloud/jobs/submit", { config_name: kind });
        answered.push(now() - start);
        for (const deadline = Date.now() + 30_000; ; await new Promise((r) => setTimeout(r, 2))) {
          const mine = fake.requests.slice(seen).filter((r) => r.method === "POST" && r.at >= start);
          const training = mine.find((r) => r.path.endsWith("/trainings"));
          if (training) {
            firstCall.push(mine[0]!.at - start);
            created.push(training.at - start);
            break;
          }
          if (Date.now() > deadline) throw new Error("the submission never reached the provider");
        }
      }
      const a = percentiles(answered);
      const f = percentiles(firstCall);
      const c = percentiles(created);
      const label = "10 images (uploaded first)";
      out(`cloud submit, ${label}, ${jobs} jobs:`);
      out(`  submit answered          p50 ${fmt(a.p50)} ms   p99 ${fmt(a.p99)} ms`);
      out(`  first provider call      p50 ${fmt(f.p50)} ms   p99 ${fmt(f.p99)} ms`);
      out(`  training created         p50 ${fmt(c.p50)} ms   p99 ${fmt(c.p99)} ms`);
    }
  } finally {
    await stack.stop();
    await fake.stop();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`bench:cloud failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
