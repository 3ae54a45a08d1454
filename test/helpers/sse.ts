/** One server-sent event: its id, its event name ("message" when none) and its data as JSON. */
export interface SseEvent {
  id: string | null;
  event: string;
  data: any;
}

/**
 * The events of a text/event-stream body as they arrive; comments and data-less blocks are
 * skipped. Leaving the loop early cancels the stream. Shared by the tests and the benchmarks.
 */
export async function* sseEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<SseEvent> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      let cut: number;
      while ((cut = buffer.indexOf("\n\n")) !== -1) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const fields = Object.fromEntries(
          block
            .split("\n")
            .filter((line) => line && !line.startsWith(":"))
            .map((line) => [line.slice(0, line.indexOf(":")), line.slice(line.indexOf(":") + 1).trimStart()]),
        );
        if (fields.data !== undefined) yield { id: fields.id ?? null, event: fields.event ?? "message", data: JSON.parse(fields.data) };
      }
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
}
