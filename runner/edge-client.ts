/** The runner's side of the worker API: JSON over HTTPS with the worker token. */
export class EdgeError extends Error {
  constructor(
    readonly status: number,
    readonly detail: string,
  ) {
    super(`${status}: ${detail}`);
  }
}

export interface Assignment {
  job_id: string;
  config_name: string | null;
  config: Record<string, unknown>;
  dataloader?: Record<string, unknown>[];
  allocated_gpus: number[] | null;
  num_processes: number;
  attempt: number;
}

export interface HeartbeatAnswer {
  worker_id: number;
  status: string;
  heartbeat_interval_seconds: number;
  heartbeat_timeout_seconds: number;
  assignments: Assignment[];
  commands?: { id: number; job_id: string; command: "validation" | "checkpoint" | "stop" }[];
}

export class EdgeClient {
  constructor(
    private readonly base: string,
    private readonly token: string,
  ) {}

  async get<T>(path: string): Promise<T> {
    const response = await this.fetch(path);
    return (await response.json()) as T;
  }

  /** A GET with the token; throws EdgeError unless 2xx (the body is left to the caller). */
  async fetch(path: string): Promise<Response> {
    const response = await fetch(new URL(path, this.base), { headers: { authorization: `Bearer ${this.token}` }, signal: AbortSignal.timeout(300_000) });
    if (!response.ok) throw await edgeError(response);
    return response;
  }

  async post<T>(path: string, body: unknown): Promise<T> {
    const response = await fetch(new URL(path, this.base), {
      method: "POST",
      headers: { authorization: `Bearer ${this.token}`, "content-type": "application/json" },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(30_000),
    });
    if (!response.ok) throw await edgeError(response);
    return (await response.json()) as T;
  }
}

/** A refusal as an EdgeError with the answer's `detail` (or its text when it is not JSON). */
async function edgeError(response: Response): Promise<EdgeError> {
  const text = await response.text();
  try {
    return new EdgeError(response.status, (JSON.parse(text) as { detail?: string }).detail ?? text);
  } catch {
    return new EdgeError(response.status, text);
  }
}
