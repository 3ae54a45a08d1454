import { CLOUD_PHASES } from "../../shared/schemas/cloud";

/*
 * Where a cloud job is at its provider (cloud_jobs.phase), apart from its queue status. Every
 * change of phase is written by moveCloudJob (edge/cloud/record.ts), which refuses one this
 * table does not list. The allowed changes:
 *
 *   queued -> uploading      the archive's upload begins
 *   queued -> submitting     nothing to upload (no dataset files): the training create is sent
 *   queued -> finished       cancelled before anything was sent, or failed (the datasets changed,
 *                            the provider could not be reached)
 *   uploading -> uploading   an upload tried again after a transient failure
 *   uploading -> submitting  uploaded: the training create is sent
 *   uploading -> finished    cancelled while uploading, or failed
 *   submitting -> submitted  the provider answered the create with its training
 *   submitting -> queued     the create certainly was not acted on (a 429, nothing sent): back to
 *   submitting -> uploading    where it was, for the alarm to send it again
 *   submitting -> finished   the create's answer was lost, or the object was interrupted while
 *                            waiting for it: failed, never sent twice
 *   submitted -> running     the provider reports the training processing
 *   submitted -> finished    it ended at the provider (or was given up, or cancelled)
 *   running -> running       the provider reports it processing again
 *   running -> finished      it ended at the provider (or was given up, or cancelled)
 *
 * `finished` is terminal: only the archive's removal at the provider is left.
 */

export { CLOUD_PHASES };

export type CloudPhase = (typeof CLOUD_PHASES)[number];

/** Each phase and the phases a job may move to from it (see the table above). */
export const PHASE_TRANSITIONS: Readonly<Record<CloudPhase, readonly CloudPhase[]>> = {
  queued: ["uploading", "submitting", "finished"],
  uploading: ["uploading", "submitting", "finished"],
  submitting: ["submitted", "queued", "uploading", "finished"],
  submitted: ["running", "finished"],
  running: ["running", "finished"],
  finished: [],
};

/** A phase change the table does not list: refused, nothing written. */
export class PhaseTransitionError extends Error {
  constructor(
    readonly jobId: string,
    readonly from: CloudPhase,
    readonly to: CloudPhase,
  ) {
    super(`cloud job ${jobId} cannot move from phase ${from} to ${to}`);
    this.name = "PhaseTransitionError";
  }
}

/**
 * Whether the table allows a job in phase `from` to move to `to`.
 *
 * @example
 * canMovePhase("submitted", "running"); // true
 * canMovePhase("finished", "running"); // false
 */
export function canMovePhase(from: CloudPhase, to: CloudPhase): boolean {
  return PHASE_TRANSITIONS[from].includes(to);
}

/**
 * The phases a job may move to `to` from (what the conditional write of a phase accepts).
 *
 * @example
 * phasesBefore("running"); // ["submitted", "running"]
 */
export function phasesBefore(to: CloudPhase): CloudPhase[] {
  return CLOUD_PHASES.filter((from) => canMovePhase(from, to));
}

/**
 * A stored phase, checked: a value that is not a phase is a corrupt row, and throws.
 *
 * @example
 * parsePhase("running"); // "running"
 */
export function parsePhase(value: unknown): CloudPhase {
  if (!(CLOUD_PHASES as readonly unknown[]).includes(value)) throw new Error(`not a cloud job phase: ${JSON.stringify(value)}`);
  return value as CloudPhase;
}
