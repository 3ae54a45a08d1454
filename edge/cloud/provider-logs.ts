import { MAX_LOG_LINE_CHARS } from "../../shared/schemas/events";

/** A provider log line as a job event, numbered by where it starts in the provider's log text. */
export interface ProviderLogEvent {
  seq: number;
  event: { type: "log"; message: string };
}

/**
 * The new lines of a provider's log (the provider sends the whole text each time) as `log`
 * events, past `offset` (what was taken before). Complete lines only until the run is `over`: a
 * line the provider is still writing is taken whole next time. Each line's seq is where it
 * starts in the text, so a line applied twice (a webhook and a poll with the same text) is stored
 * once; its message is cut at MAX_LOG_LINE_CHARS, as a runner's lines are. `offset` is where the
 * next call starts.
 *
 * @example
 * providerLogEvents("step 1\nstep 2\nstep", 0, false); // { events: [{ seq: 0, ... "step 1" }, { seq: 7, ... "step 2" }], offset: 14 }
 */
export function providerLogEvents(logs: string, offset: number, over: boolean): { events: ProviderLogEvent[]; offset: number } {
  const fresh = logs.length > offset ? logs.slice(offset) : "";
  const cut = over ? fresh.length : fresh.lastIndexOf("\n") + 1;
  const events: ProviderLogEvent[] = [];
  let start = 0;
  for (const line of fresh.slice(0, cut).split("\n")) {
    if (start < cut && (line || start + 1 < cut))
      events.push({ seq: offset + start, event: { type: "log", message: line.slice(0, MAX_LOG_LINE_CHARS) } });
    start += line.length + 1;
  }
  return { events, offset: offset + cut };
}
