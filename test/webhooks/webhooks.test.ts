// Outbound webhooks, the pure parts: which targets are refused (SSRF), what a job's
// --webhook_config means, and which events become lifecycle messages.
import { describe, expect, it } from "vitest";
import { lifecycleOf, webhookConfig } from "../../edge/webhooks/lifecycle";
import { refusedAddress, refusedHost, refusedTarget, webhookLimitProblems } from "../../edge/webhooks/targets";

describe("refusedTarget", () => {
  it("refuses loopback, private, link-local and local names unless private targets are allowed", () => {
    for (const url of [
      "http://127.0.0.1:8080/h",
      "http://localhost/h",
      "http://api.localhost/h",
      "http://10.1.2.3/h",
      "http://172.16.0.1/h",
      "http://192.168.1.1/h",
      "http://169.254.169.254/latest",
      "http://0.0.0.0/",
      "http://[::1]/h",
      "http://[fd00::1]/h",
      "http://[fe80::1]/h",
      "http://[::ffff:127.0.0.1]/h",
      "http://intranet/h",
      "http://db.internal/h",
      "http://printer.local/h",
      "http://100.64.0.1/",
    ]) {
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

  it("refuses the tricks: a trailing dot, IPv4 in other notations, and IPv6 ranges that embed or reach IPv4", () => {
    const cases: [string, RegExp][] = [
      ["http://localhost./h", /^localhost\. ends with a dot: write the name without it$/],
      ["http://hooks.example.com./h", /ends with a dot/],
      ["http://0x7f.1/h", /^127\.0\.0\.1 is a loopback, private or reserved address; /],
      ["http://2130706433/h", /^127\.0\.0\.1 is a loopback/],
      ["http://[64:ff9b::7f00:1]/h", /\(rfc6052\)/],
      ["http://[64:ff9b:1::a00:1]/h", /\(rfc6052\)/],
      ["http://[2002:7f00:1::]/h", /\(6to4\)/],
      ["http://[::7f00:1]/h", /IPv4-compatible address/],
      ["http://[::a00:1]/h", /IPv4-compatible address/],
      ["http://[2001::1]/h", /\(teredo\)/],
      ["http://[100::1]/h", /\(discard\)/],
      ["http://[fec0::1]/h", /\(deprecatedSiteLocal\)/],
      ["http://[2001:db8::1]/h", /\(reserved\)/],
      ["http://[::]/h", /\(unspecified\)/],
      ["http://[::ffff:a00:1]/h", /^::ffff:a00:1 is a loopback, private or reserved address; /],
      ["http://192.0.2.1/h", /^192\.0\.2\.1 is a loopback, private or reserved address; /],
      ["http://255.255.255.255/h", /^255\.255\.255\.255 is a loopback/],
      ["http://router.home.arpa/h", /local name/],
    ];
    for (const [url, expected] of cases) {
      expect(refusedTarget(url, false), url).toMatch(expected);
      expect(refusedTarget(url, true), url).toBeNull();
    }
    expect(refusedTarget("http://[2606:4700:4700::1111]/h", false)).toBeNull();
    expect(refusedAddress("1.1.1.1")).toBeNull();
    expect(refusedAddress("2a00:1450:4001::1")).toBeNull();
    expect(refusedAddress("::ffff:10.0.0.1")).toMatch(/^::ffff:10\.0\.0\.1 is a loopback, private or reserved address; /);
    expect(refusedAddress("not-an-address")).toBe("not-an-address is not an IP address");
  });

  it("checks a bare host the same way, with the caller's hint (the provider settings reuse it)", () => {
    const hint = "ask someone";
    expect(refusedHost("169.254.169.254", hint)).toBe("169.254.169.254 is a loopback, private or reserved address; ask someone");
    expect(refusedHost("[::1]", hint)).toBe("::1 is a loopback, private or reserved address (loopback); ask someone");
    expect(refusedHost("metadata.google.internal", hint)).toBe("metadata.google.internal is a local name; ask someone");
    expect(refusedHost("127.0.0.1")).toMatch(/an admin can allow private targets \(PUT \/api\/admin\/webhooks\)$/);
    expect(refusedHost("api.replicate.com", hint)).toBeNull();
  });

  it("limits a job to 5 targets and a reporting interval of at least 5 s, naming the option", () => {
    expect(webhookLimitProblems(5, 5)).toEqual([]);
    expect(webhookLimitProblems(6, 4)).toEqual([
      { field: "--webhook_config", message: "at most 5 webhook targets per job; this names 6" },
      { field: "--webhook_reporting_interval", message: "must be at least 5 (seconds)" },
    ]);
    // Stored before the limits, a config is still bounded when delivered.
    const many = JSON.stringify(Array.from({ length: 8 }, (_, i) => ({ callback_url: `https://h${i}.example/in` })));
    expect(webhookConfig({ "--webhook_config": many, "--webhook_reporting_interval": 0 })).toMatchObject({
      intervalSeconds: 5,
      targets: expect.any(Array),
    });
    expect(webhookConfig({ "--webhook_config": many }).targets).toHaveLength(5);
  });
});

describe("webhookConfig and lifecycleOf", () => {
  it("reads the receivers and the interval (seconds, default 30); skips entries without a URL", () => {
    expect(webhookConfig({})).toEqual({ targets: [], intervalSeconds: 30 });
    const config = webhookConfig({
      "--webhook_config": JSON.stringify([
        { webhook_type: "raw", callback_url: "https://a.example/h" },
        { log_level: "info" },
        { callback_url: "https://b.example/h", signing_secret: "whsec_abc" },
      ]),
      "--webhook_reporting_interval": 5,
    });
    expect(config).toEqual({
      intervalSeconds: 5,
      targets: [
        { url: "https://a.example/h", type: "raw", secret: null },
        { url: "https://b.example/h", type: "raw", secret: "whsec_abc" },
      ],
    });
    expect(webhookConfig({ "--webhook_config": "not json" }).targets).toEqual([]);
  });

  it("turns trainer events into lifecycle messages, and nothing else", () => {
    expect(lifecycleOf({ type: "training.started", data: { total_steps: 20, resumed_from_step: 0 } })).toEqual({
      type: "job.started",
      data: { total_steps: 20, resumed_from_step: 0 },
    });
    expect(lifecycleOf({ type: "training.progress", data: { step: 3, total_steps: 20, percent: 15, loss: 0.5, epoch: 1 } })).toEqual({
      type: "job.progress",
      data: { step: 3, total_steps: 20, percent: 15, loss: 0.5, epoch: 1 },
    });
    expect(lifecycleOf({ type: "checkpoint.saved", data: { step: 5, path: "/o/checkpoint-5" } })).toEqual({
      type: "job.checkpoint",
      data: { step: 5, path: "/o/checkpoint-5" },
    });
    expect(lifecycleOf({ type: "log" })).toBeNull();
    expect(lifecycleOf({ type: "validation.image" })).toBeNull();
  });
});
