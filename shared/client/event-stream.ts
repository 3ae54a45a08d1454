import { EventSourceParserStream, type EventSourceMessage } from "eventsource-parser/stream";

export type StreamMessage = EventSourceMessage;

/**
 * The messages of a server-sent event stream (GET /api/training/events/stream) as they arrive,
 * parsed by eventsource-parser; `onComment` gets the keep-alive and closing comments. Leaving
 * the loop early cancels the stream.
 *
 * @example
 * const response = await client.call(endpoints.trainingEventStream, { query: { job_id } }, { timeoutMs: null });
 * for await (const message of readEventStream(response)) console.log(message.id, JSON.parse(message.data));
 */
export async function* readEventStream(response: Response, onComment?: (comment: string) => void): AsyncGenerator<StreamMessage> {
  if (!response.body) return;
  const reader = response.body
    .pipeThrough(new TextDecoderStream())
    .pipeThrough(new EventSourceParserStream(onComment ? { onComment } : {}))
    .getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      yield value;
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
}
