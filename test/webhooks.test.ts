// Outbound webhooks, the pure parts: which targets are refused (SSRF), what a job's
// --webhook_config means, and which events become lifecycle messages.
import { describe, expect, it } from "vitest";
import { lifecycleOf, webhookConfig } from "../edge/webhooks/lifecycle";
import { refusedTarget } from "../edge/webhooks/targets";

describe("refusedTarget", () => {
  it("refuses loopback, private, link-local and local names unless private targets are allowed", () => {
    for (const url of ["http://127.0.0.1:8080/h", "http://localhost/h", "http://api.localhost/h", "http://10.1.2.3/h", "http://172.16.0.1/h", "http://192.168.1.1/h", "http://169.254.169.254/latest", "http://0.0.0.0/", "http://[::1]/h", "http://[fd00::1]/h", "http://[fe80::1]/h", "http://[::ffff:127.0.0.1]/h", "http://intranet/h", "http://db.internal/h", "http://printer.local/h", "http://100.64.0.1/"]) {
      expect(refusedTarget(url, false), url).toMatch(/local name|private|loopback/);
      expect(refusedTarget(url, true), url).toBeNull();
    }
    expect(refusedTarget("https://hooks.example.com/in", false)).toBeNull();
    expect(refusedTarget("http://8.8.8.8/x", false)).toBeNull();
    expect(refusedTarget("http://172.32.0.1/x", false)).toBeNull();
    expect(refusedTarget("ftp://example.com/x", true)).toBe("only http and https URLs are called");
    expect(refusedTarget("https://user:pw@example.com/x", true)).toBe("credentials in the URL are not allowed");
    expect(refusedTarget("not a url", true)).toBe("not a URL");
  });
});

describe("webhookConfig and lifecycleOf", () => {
  it("reads the receivers and the interval (seconds, default 30); skips entries without a URL", () => {
    expect(webhookConfig({})).toEqual({ targets: [], intervalSeconds: 30 });
    const config = webhookConfig({ "--webhook_config": JSON.stringify([{ webhook_type: "raw", callback_url: "https://a.example/h" }, { log_level: "info" }, { callback_url: "https://b.example/h", signing_secret: "whsec_abc" }]), "--webhook_reporting_interval": 5 });
    expect(config).toEqual({ intervalSeconds: 5, targets: [{ url: "https://a.example/h", type: "raw", secret: null }, { url: "https://b.example/h", type: "raw", secret: "whsec_abc" }] });
    expect(webhookConfig({ "--webhook_config": "not json" }).targets).toEqual([]);
  });

  it("turns trainer events into lifecycle messages, and nothing else", () => {
    expect(lifecycleOf({ type: "training.started", data: { total_steps: 20, resumed_from_step: 0 } })).toEqual({ type: "job.started", data: { total_steps: 20, resumed_from_step: 0 } });
    expect(lifecycleOf({ type: "training.progress", data: { step: 3, total_steps: 20, percent: 15, loss: 0.5, epoch: 1 } })).toEqual({ type: "job.progress", data: { step: 3, total_steps: 20, percent: 15, loss: 0.5, epoch: 1 } });
    expect(lifecycleOf({ type: "checkpoint.saved", data: { step: 5, path: "/o/checkpoint-5" } })).toEqual({ type: "job.checkpoint", data: { step: 5, path: "/o/checkpoint-5" } });
    expect(lifecycleOf({ type: "log" })).toBeNull();
    expect(lifecycleOf({ type: "validation.image" })).toBeNull();
  });
});
