import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { asServiceError, type ServiceError } from "../api";

export interface Loaded<T> {
  data: T | undefined;
  error: ServiceError | null;
  loading: boolean;
  /** Loads again (after a change the view made). */
  reload: () => Promise<void>;
}

/**
 * Loads data for a view and reloads it when `deps` change; a later load wins over an earlier one
 * still in flight.
 *
 * @example
 * const users = useLoad(() => call(endpoints.userList, {}), []);
 */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[]): Loaded<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<ServiceError | null>(null);
  const [loading, setLoading] = useState(true);
  const generation = useRef(0);
  const run = useCallback(async () => {
    const mine = ++generation.current;
    setLoading(true);
    try {
      const value = await load();
      if (mine !== generation.current) return;
      setData(value);
      setError(null);
    } catch (caught) {
      if (mine === generation.current) setError(asServiceError(caught));
    } finally {
      if (mine === generation.current) setLoading(false);
    }
  }, deps);
  useEffect(() => {
    void run();
  }, [run]);
  return { data, error, loading, reload: run };
}

/**
 * Runs one action of a view (a button, a form) and keeps its error beside it.
 *
 * @example
 * const cancel = useAction(() => call(endpoints.queueCancel, { params: { job_id } }), reload);
 * <button onClick={cancel.run} disabled={cancel.busy}>Cancel</button><ErrorNote error={cancel.error} />
 */
export function useAction<A extends unknown[], T>(action: (...args: A) => Promise<T>, after?: (result: T) => unknown) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ServiceError | null>(null);
  const run = async (...args: A): Promise<T | undefined> => {
    setBusy(true);
    setError(null);
    try {
      const result = await action(...args);
      await after?.(result);
      return result;
    } catch (caught) {
      setError(asServiceError(caught));
      return undefined;
    } finally {
      setBusy(false);
    }
  };
  return { run, busy, error, clear: () => setError(null) };
}
