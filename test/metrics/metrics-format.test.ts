// The pure parts of the metrics: the text exposition format and an isolate's pending tally.
import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { escapeLabelValue, renderExposition, type MetricFamily } from "../../edge/metrics/exposition";
import { HttpTally } from "../../edge/metrics/tally";
import { prerequisite } from "../helpers/prerequisites";

const promtool = prerequisite("promtool (Debian package prometheus)", spawnSync("promtool", ["--version"]).status === 0);

describe("renderExposition", () => {
  it("writes HELP and TYPE before each family's samples and ends with a line feed", () => {
    const families: MetricFamily[] = [
      { name: "service_jobs_active", type: "gauge", help: "Active jobs", samples: [{ value: 3 }] },
      {
        name: "service_http_requests_total",
        type: "counter",
        help: "Requests",
        samples: [
          { labels: { endpoint: "GET_/api/queue" }, value: 12 },
          { labels: { endpoint: "POST_/api/queue/{job_id}/cancel" }, value: 1 },
        ],
      },
    ];
    expect(renderExposition(families)).toBe(
      [
        "# HELP service_jobs_active Active jobs",
        "# TYPE service_jobs_active gauge",
        "service_jobs_active 3",
        "# HELP service_http_requests_total Requests",
        "# TYPE service_http_requests_total counter",
        'service_http_requests_total{endpoint="GET_/api/queue"} 12',
        'service_http_requests_total{endpoint="POST_/api/queue/{job_id}/cancel"} 1',
        "",
      ].join("\n"),
    );
  });

  it("announces a family with no samples by its HELP and TYPE alone", () => {
    expect(renderExposition([{ name: "service_credit_balance_usd", type: "gauge", help: "Balance", samples: [] }])).toBe(
      "# HELP service_credit_balance_usd Balance\n# TYPE service_credit_balance_usd gauge\n",
    );
  });

  it("renders no families as an empty body", () => {
    expect(renderExposition([])).toBe("");
  });

  it("escapes backslash, double quote and line feed in label values, and backslash and line feed in HELP", () => {
    expect(escapeLabelValue('a\\b"c\nd')).toBe('a\\\\b\\"c\\nd');
    const text = renderExposition([
      { name: "x_total", type: "counter", help: 'say "hi"\\now\nthen', samples: [{ labels: { path: 'C:\\dir "q"\nnext' }, value: 1 }] },
    ]);
    expect(text).toBe('# HELP x_total say "hi"\\\\now\\nthen\n# TYPE x_total counter\nx_total{path="C:\\\\dir \\"q\\"\\nnext"} 1\n');
  });

  it("writes NaN and infinities the way the format spells them, and decimals as they are", () => {
    const text = renderExposition([
      {
        name: "g",
        type: "gauge",
        help: "h",
        samples: [
          { labels: { k: "a" }, value: NaN },
          { labels: { k: "b" }, value: Infinity },
          { labels: { k: "c" }, value: -Infinity },
          { labels: { k: "d" }, value: 0.125 },
        ],
      },
    ]);
    expect(text.split("\n").slice(2, 6)).toEqual(['g{k="a"} NaN', 'g{k="b"} +Inf', 'g{k="c"} -Inf', 'g{k="d"} 0.125']);
  });

  it("refuses metric and label names the format cannot carry", () => {
    expect(() => renderExposition([{ name: "bad-name", type: "gauge", help: "h", samples: [] }])).toThrow('invalid metric name "bad-name"');
    expect(() => renderExposition([{ name: "ok", type: "gauge", help: "h", samples: [{ labels: { "0bad": "v" }, value: 1 }] }])).toThrow(
      'invalid label name "0bad" on ok',
    );
  });

  it.skipIf(!promtool)("is parsed by promtool with escaped values and nothing to report", () => {
    const text = renderExposition([
      {
        name: "weird_labels_total",
        type: "counter",
        help: 'Help with "quotes" and \\ backslash\nand a line',
        samples: [{ labels: { endpoint: 'GET_/a\\b"c\nd' }, value: 2 }],
      },
      { name: "empty_family", type: "gauge", help: "No samples yet", samples: [] },
    ]);
    const result = spawnSync("promtool", ["check", "metrics"], { input: text, encoding: "utf8" });
    expect(`${result.stdout}${result.stderr}`.trim()).toBe("");
    expect(result.status).toBe(0);
  });
});

describe("HttpTally", () => {
  const request = { endpoint: "GET_/api/queue", status: 200, latencyMs: 4, countedClient: null, limited: false, at: 1_000 };

  it("sums requests, latency and error statuses per endpoint, counts refusals and keeps each client's latest time", () => {
    const tally = new HttpTally();
    tally.add(request);
    tally.add({ ...request, status: 404, latencyMs: 6 });
    tally.add({
      ...request,
      endpoint: "POST_/api/cloud/auth/login",
      status: 429,
      latencyMs: 1,
      countedClient: "10.0.0.1",
      limited: true,
      at: 2_000,
    });
    tally.add({ ...request, endpoint: "POST_/api/cloud/auth/login", status: 401, latencyMs: 1, countedClient: "10.0.0.1", at: 1_500 });
    expect(tally.requests).toBe(4);
    expect(tally.take()).toEqual({
      endpoints: [
        { endpoint: "GET_/api/queue", requests: 2, latencyMsSum: 10, errors: [[404, 1]] },
        {
          endpoint: "POST_/api/cloud/auth/login",
          requests: 2,
          latencyMsSum: 2,
          errors: [
            [429, 1],
            [401, 1],
          ],
        },
      ],
      violations: 1,
      clients: [["10.0.0.1", 2_000]],
    });
    expect(tally.requests).toBe(0);
    expect(tally.take()).toBeNull();
  });

  it("takes back a batch the collector did not accept, merged with what came since", () => {
    const tally = new HttpTally();
    tally.add({ ...request, status: 500, countedClient: "10.0.0.2", limited: true });
    const failed = tally.take()!;
    tally.add({ ...request, status: 500, countedClient: "10.0.0.2", at: 3_000 });
    tally.restore(failed);
    expect(tally.requests).toBe(2);
    expect(tally.take()).toEqual({
      endpoints: [{ endpoint: "GET_/api/queue", requests: 2, latencyMsSum: 8, errors: [[500, 2]] }],
      violations: 1,
      clients: [["10.0.0.2", 3_000]],
    });
  });
});
