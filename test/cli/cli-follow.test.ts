// `jobs logs --follow`'s reconnecting reader against a fake fetch (a cut stream, a silent one, an
// unreachable service, a refusal), how events are rendered as lines, and how --since and --tail
// are read: pure functions.
import { describe, expect, it } from "vitest";
import { ServiceClient, ServiceError } from "../../shared/client/client";
import { eventLine, eventText } from "../../shared/event-line";
import { backoffMs, followEvents } from "../../runner/cli/follow";
import { parseSince, parseTail } from "../../runner/cli/log-window";
import { UsageError } from "../../runner/cli/output";

const event = (index: number, type = "log") => ({ index, timestamp: "2026-01-02T03:04:05.000Z", type, message: `line ${index}` });
const sse = (index: number) => `id: ${index}\ndata: ${JSON.stringify(event(index))}\n\n`;
const END = `event: end\ndata: {"status":"completed"}\n\n`;

/**
 * A stream answer that sends `chunks` one read at a time, then ends, breaks (`"error"`), or stays
 * open and silent (`"hang"`) until the request's signal aborts it, as fetch's bodies do.
 */
function streamAnswer(chunks: string[], then: "end" | "error" | "hang"): (signal?: AbortSignal) => Response {
  return (signal) => {
    const encoder = new TextEncoder();
    const left = [...chunks];
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        signal?.addEventListener("abort", () => controller.error(signal.reason));
      },
      pull(controller) {
        const chunk = left.shift();
        if (chunk !== undefined) controller.enqueue(encoder.encode(chunk));
        else if (then === "end") controller.close();
        else if (then === "error") controller.error(new TypeError("terminated"));
        else return new Promise<void>(() => {}); // silent until aborted
      },
    });
    return new Response(body, { headers: { "content-type": "text/event-stream" } });
  };
}

/** A client whose fetch answers with `answers` in turn, recording each request's URL and Last-Event-ID. */
function fakeClient(answers: ((signal?: AbortSignal) => Response)[]) {
  const requests: { url: string; lastEventId: string | null }[] = [];
  const client = new ServiceClient({
    baseUrl: "http://service.test",
    apiKey: "st_test",
    fetch: async (input, init) => {
      requests.push({ url: String(input), lastEventId: new Headers(init?.headers).get("last-event-id") });
      const next = answers.shift();
      if (!next) throw new Error("no more answers");
      return next(init?.signal ?? undefined);
    },
  });
  return { client, requests };
}

async function follow(
  answers: ((signal?: AbortSignal) => Response)[],
  extra: { idleMs?: number; maxFailures?: number; since?: number } = {},
) {
  const { client, requests } = fakeClient(answers);
  const seen: number[] = [];
  const notes: string[] = [];
  const waits: number[] = [];
  const result = followEvents({
    client,
    jobId: "local-1",
    since: extra.since ?? 0,
    onEvent: (e) => seen.push(e.index),
    onNote: (text) => notes.push(text),
    sleep: async (ms) => void waits.push(ms),
    ...(extra.idleMs ? { idleMs: extra.idleMs } : {}),
    ...(extra.maxFailures ? { maxFailures: extra.maxFailures } : {}),
  });
  return { result, seen, notes, waits, requests };
}

describe("followEvents", () => {
  it("resumes a cut stream with Last-Event-ID and delivers no event twice, even when the service repeats one", async () => {
    const run = await follow([
      streamAnswer([sse(0), sse(1)], "error"),
      streamAnswer([sse(1), sse(2)], "end"), // closed without its end event: open again
      streamAnswer([sse(2), sse(3), END], "end"),
    ]);
    expect(await run.result).toBe("completed");
    expect(run.seen).toEqual([0, 1, 2, 3]);
    expect(run.requests.map((r) => r.lastEventId)).toEqual([null, "1", "2"]);
    expect(run.requests[0]!.url).toBe("http://service.test/api/training/events/stream?job_id=local-1&since_index=0");
    // Each attempt that delivered something starts the backoff again at 1 s.
    expect(run.waits).toEqual([1000, 1000]);
    expect(run.notes).toEqual([
      "the event stream broke (terminated); reconnecting in 1 s",
      "the event stream closed before the job ended; reconnecting in 1 s",
    ]);
  });

  it("starts at --since and reconnects from it when nothing was seen yet", async () => {
    const run = await follow([streamAnswer([], "error"), streamAnswer([sse(5), END], "end")], { since: 5 });
    expect(await run.result).toBe("completed");
    expect(run.seen).toEqual([5]);
    expect(run.requests.map((r) => [new URL(r.url).searchParams.get("since_index"), r.lastEventId])).toEqual([
      ["5", null],
      ["5", null],
    ]);
  });

  it("takes a connection silent for idleMs for dead and opens another", async () => {
    const run = await follow([streamAnswer([sse(0)], "hang"), streamAnswer([END], "end")], { idleMs: 50 });
    expect(await run.result).toBe("completed");
    expect(run.seen).toEqual([0]);
    expect(run.requests.map((r) => r.lastEventId)).toEqual([null, "0"]);
    expect(run.notes).toEqual(["no word from the service for 0.05 s; reconnecting in 1 s"]);
  });

  it("backs off 1, 2, 4, 8, 10 s while the service is unreachable or overloaded, and gives up after maxFailures", async () => {
    const down = () => {
      throw new TypeError("fetch failed");
    };
    const busy = () => new Response(JSON.stringify({ detail: "too many watchers", code: "too_many_watchers" }), { status: 429 });
    const run = await follow([down, busy, down, down, down, down, down], { maxFailures: 7 });
    await expect(run.result).rejects.toMatchObject({ name: "ServiceError", status: 0, code: "unreachable" });
    expect(run.waits).toEqual([1000, 2000, 4000, 8000, 10000, 10000]);
    expect(run.notes[1]).toBe("too many watchers; reconnecting in 2 s");
    expect([1, 2, 3, 4, 5, 6, 20].map(backoffMs)).toEqual([1000, 2000, 4000, 8000, 10000, 10000, 10000]);
  });

  it("throws a refusal (another user's job) at once, without retrying", async () => {
    const run = await follow([
      () => new Response(JSON.stringify({ detail: "Job local-1 is not yours", code: "not_your_job" }), { status: 403 }),
    ]);
    const error = await run.result.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ServiceError);
    expect(error).toMatchObject({ status: 403, code: "not_your_job", detail: "Job local-1 is not yours" });
    expect(run.requests).toHaveLength(1);
    expect(run.waits).toEqual([]);
  });
});

describe("event lines", () => {
  const at = "2026-01-02T03:04:05.000Z";
  it("renders progress as step/total and loss, checkpoints with their path, and media as a count, never a data URI", () => {
    expect(
      eventText({ index: 1, timestamp: at, type: "training.progress", title: "Step 3/50", data: { step: 3, total_steps: 50, loss: 0.41 } }),
    ).toBe("step 3/50 loss 0.4100");
    expect(eventText({ index: 2, timestamp: at, type: "training.progress", data: { step: 7, total_steps: 9, loss: 0.00012346 } })).toBe(
      "step 7/9 loss 0.0001235",
    );
    expect(
      eventText({
        index: 3,
        timestamp: at,
        type: "checkpoint.saved",
        title: "Checkpoint saved at step 10",
        data: { step: 10, path: "output/checkpoint-10" },
      }),
    ).toBe("Checkpoint saved at step 10 (output/checkpoint-10)");
    const image = { src: "data:image/png;base64,iVBORw0KGgo=", mime_type: "image/png" };
    const preview = {
      index: 4,
      timestamp: at,
      type: "validation.image",
      title: "Validation preview 5/20",
      body: "a fox",
      data: {},
      images: [image],
    };
    expect(eventText(preview)).toBe("Validation preview 5/20 (1 image)");
    expect(eventText({ ...preview, title: undefined, body: undefined, images: [image, image] })).toBe("2 images");
    expect(eventText({ index: 5, timestamp: at, type: "log", message: "\x1b[32mloading\x1b[0m model\r\nnext" })).toBe("loading model next");
    expect(eventText({ index: 6, timestamp: at, type: "webhook", data: { message: "raw webhook" } })).toBe("raw webhook");
    expect(eventText({ index: 7, timestamp: at, type: "odd", data: { a: 1 } })).toBe('{"a":1}');
  });

  it("prefixes the local time and the type", () => {
    const local = new Date(at);
    const clock = [local.getHours(), local.getMinutes(), local.getSeconds()].map((n) => String(n).padStart(2, "0")).join(":");
    expect(eventLine({ index: 0, timestamp: at, type: "log", message: "hello" })).toBe(`${clock} log hello`);
    expect(eventLine({ index: 0, timestamp: "not a time", type: "training.started", data: {} })).toBe("--:--:-- training.started");
  });
});

describe("--since and --tail values", () => {
  const now = Date.parse("2026-01-02T03:04:05.000Z");
  it("reads a bare number as an event index and a number with s, m, h or d as that long before now", () => {
    expect(parseSince("0", now)).toEqual({ index: 0 });
    expect(parseSince("550", now)).toEqual({ index: 550 });
    expect(parseSince("30s", now)).toEqual({ after: now - 30_000 });
    expect(parseSince("10m", now)).toEqual({ after: now - 600_000 });
    expect(parseSince("2h", now)).toEqual({ after: now - 7_200_000 });
    expect(parseSince("1d", now)).toEqual({ after: now - 86_400_000 });
    expect(parseTail("0")).toBe(0);
    expect(parseTail("20")).toBe(20);
  });

  it("refuses anything else as a usage error", () => {
    for (const value of ["", "-1", "1.5", "10x", "1h30m", "h", " 5", "99999999999999999999"])
      expect(() => parseSince(value, now), value).toThrow(UsageError);
    for (const value of ["", "-1", "2.5", "3s", "abc"]) expect(() => parseTail(value), value).toThrow(UsageError);
  });
});
