import { useEffect, useRef, useState } from "preact/hooks";
import { asServiceError, call, client, endpoints, type ServiceError } from "../api";
import { applyEvents, EMPTY_TRAINING, type StreamEvent, type TrainingState } from "./job-events";

/** Events arriving within this long are applied together: one render for a replay's hundreds. */
const BATCH_MS = 100;

export interface JobStream {
  training: TrainingState;
  /** connecting (or reconnecting), live, ended (the job ended: its final status), refused. */
  phase: "connecting" | "live" | "ended" | "refused";
  /** The job's status from the stream's end event. */
  endStatus: string | null;
  /** Why the stream was refused or gave up (the service's own words). */
  error: ServiceError | null;
}

/**
 * A job's events, live, from GET /api/training/events/stream through the browser's EventSource:
 * same origin, so it sends the session cookie, and it reconnects by itself with Last-Event-ID
 * (the service resumes right after it). Closed on the stream's end event and on unmount.
 * `enabled` false opens nothing (the caller knows the events would be refused).
 */
export function useJobStream(jobId: string, enabled: boolean, onEnd?: (status: string) => void): JobStream {
  const [training, setTraining] = useState<TrainingState>(EMPTY_TRAINING);
  const [phase, setPhase] = useState<JobStream["phase"]>("connecting");
  const [endStatus, setEndStatus] = useState<string | null>(null);
  const [error, setError] = useState<ServiceError | null>(null);
  const ended = useRef(onEnd);
  ended.current = onEnd;

  useEffect(() => {
    setTraining(EMPTY_TRAINING);
    setPhase("connecting");
    setEndStatus(null);
    setError(null);
    if (!enabled) return;
    let alive = true;
    let pending: StreamEvent[] = [];
    let timer: ReturnType<typeof setTimeout> | undefined;
    const flush = () => {
      timer = undefined;
      const batch = pending;
      pending = [];
      setTraining((state) => applyEvents(state, batch));
    };
    const url = client.url(endpoints.trainingEventStream, { query: { job_id: jobId } });
    const source = new EventSource(url);
    source.onopen = () => setPhase("live");
    source.onmessage = (message: MessageEvent<string>) => {
      let event: StreamEvent;
      try {
        event = JSON.parse(message.data) as StreamEvent;
      } catch {
        return; // not an event: nothing to show
      }
      if (typeof event?.type !== "string" || typeof event.index !== "number") return;
      pending.push(event);
      timer ??= setTimeout(flush, BATCH_MS);
    };
    source.addEventListener("end", (message: MessageEvent<string>) => {
      source.close();
      clearTimeout(timer);
      flush();
      let status = "ended";
      try {
        status = String((JSON.parse(message.data) as { status?: unknown }).status ?? status);
      } catch {
        // an end without a readable status still ends the stream
      }
      setEndStatus(status);
      setPhase("ended");
      ended.current?.(status);
    });
    source.onerror = () => {
      if (source.readyState !== EventSource.CLOSED) {
        setPhase("connecting"); // EventSource tries again by itself
        return;
      }
      // EventSource does not say why it gave up (a 403, a 429): ask the same question as a plain call.
      setPhase("refused");
      call(endpoints.trainingEvents, { query: { job_id: jobId, limit: 1 } }).then(
        () => alive && setError(asServiceError(new Error("the live event stream was closed; reload the page to follow the job again"))),
        (refusal: unknown) => alive && setError(asServiceError(refusal)),
      );
    };
    return () => {
      alive = false;
      source.close();
      clearTimeout(timer);
    };
  }, [jobId, enabled]);

  return { training, phase, endStatus, error };
}
