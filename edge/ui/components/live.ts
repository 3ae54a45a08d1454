import { useEffect, useRef, useState } from "preact/hooks";
import { client, endpoints } from "../api";

/** Change events closer together than this make one reload (a scheduler pass admits many jobs at once). */
const COALESCE_MS = 500;
/** After the service refused the stream (EventSource gives up on a 429 or 401), try again this much later. */
const RETRY_REFUSED_MS = 15_000;

export type LiveState = "live" | "connecting" | "off";

/**
 * Follows GET /api/queue/changes (jobs' status changes, server-sent events) through the browser's
 * EventSource, which sends the session cookie and reconnects by itself after a dropped
 * connection; a refused one (too many live streams) is opened again 15 s later. `onChange` runs
 * on a burst of changes at most once per 500 ms (at its start, then once more at the end of the
 * window if more arrived), and after a reconnect, since changes made meanwhile were not sent.
 * Closed on unmount. Returns the stream's state for a "Live" note.
 *
 * @example
 * const live = useQueueChanges(() => void jobs.reload());
 */
export function useQueueChanges(onChange: () => void): LiveState {
  const [state, setState] = useState<LiveState>("connecting");
  const latest = useRef(onChange);
  latest.current = onChange;

  useEffect(() => {
    let source: EventSource | null = null;
    let retry: ReturnType<typeof setTimeout> | undefined;
    let burst: ReturnType<typeof setTimeout> | undefined;
    let missed = false;
    let everReady = false;
    const fire = () => latest.current();
    const changed = () => {
      if (burst !== undefined) {
        missed = true;
        return;
      }
      fire();
      const close = () => {
        if (missed) {
          missed = false;
          fire();
          burst = setTimeout(close, COALESCE_MS);
        } else burst = undefined;
      };
      burst = setTimeout(close, COALESCE_MS);
    };
    const connect = () => {
      setState("connecting");
      source = new EventSource(client.url(endpoints.queueChanges, {}));
      source.addEventListener("ready", () => {
        setState("live");
        if (everReady) changed(); // what changed while it was away
        everReady = true;
      });
      source.addEventListener("change", changed);
      source.onerror = () => {
        if (source?.readyState !== EventSource.CLOSED) {
          setState("connecting"); // EventSource tries again by itself
          return;
        }
        setState("off");
        retry = setTimeout(connect, RETRY_REFUSED_MS);
      };
    };
    connect();
    return () => {
      source?.close();
      clearTimeout(retry);
      clearTimeout(burst);
    };
  }, []);
  return state;
}

/**
 * The words for a live state: "Connecting…" before the stream was first live, "Reconnecting…"
 * after, and what to do while it is off.
 *
 * @example
 * <span role="status" aria-live="polite">{useLiveText(useQueueChanges(reload))}</span>
 */
export function useLiveText(state: LiveState): string {
  const wasLive = useRef(false);
  if (state === "live") wasLive.current = true;
  if (state === "live") return "Live";
  if (state === "connecting") return wasLive.current ? "Reconnecting…" : "Connecting…";
  return "Not live: Reload shows changes";
}
