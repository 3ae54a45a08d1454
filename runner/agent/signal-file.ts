import { closeSync, constants, fstatSync, futimesSync, lstatSync, openSync, readSync, renameSync, rmSync, writeSync } from "node:fs";
import { SIGNAL_COUNTERS, type SignalCounters, type SignalledCommand } from "../../shared/trainer-commands";

/*
 * Commands in (README "The trainer protocol"): SimpleTuner's own signal file. Its train.py stats
 * the file named by SIMPLETUNER_ACCELERATE_SIGNAL_FILE at every check, re-reads the JSON only when
 * the mtime changed, and owes one action per increase of `manual_validation` or
 * `manual_checkpoint`. So the runner keeps the counters, only ever increments them, and replaces
 * the whole file at once (a temporary file renamed over it): a reader sees the old object or the
 * new one, never half of one.
 */

const MAX_READ = 64 * 1024;

/** The counters a signal file holds now; zero for any it lacks, for a missing or unreadable file, or one that is not a plain file. */
export function readCounters(path: string): SignalCounters {
  const counters: SignalCounters = { manual_validation: 0, manual_checkpoint: 0 };
  let fd: number;
  try {
    // Not through a link or a FIFO the trainer put there: the file is in its directory.
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch {
    return counters;
  }
  try {
    if (!fstatSync(fd).isFile()) return counters;
    const buffer = Buffer.alloc(MAX_READ);
    const n = readSync(fd, buffer, 0, MAX_READ, 0);
    const parsed = JSON.parse(buffer.subarray(0, n).toString("utf8")) as Record<string, unknown>;
    for (const key of Object.keys(counters) as (keyof SignalCounters)[]) {
      const value = parsed?.[key];
      if (typeof value === "number" && Number.isSafeInteger(value) && value > 0) counters[key] = value;
    }
  } catch {
    // unreadable: start from zero, as the trainer would
  } finally {
    closeSync(fd);
  }
  return counters;
}

/**
 * One job attempt's signal file, as the runner writes it.
 *
 * @example
 * const signals = new SignalFile("/w/jobs/local-1/trainer-signal-attempt-1.json");
 * signals.bump("validation"); // {"manual_validation":1,"manual_checkpoint":0}
 */
export class SignalFile {
  private readonly counters: SignalCounters;
  private lastMtimeMs = 0;

  /**
   * Picks up the counters already in the file (a runner restarted during the same attempt), and
   * writes it when it is missing or is not a plain file (whatever else is there goes).
   */
  constructor(readonly path: string) {
    this.counters = readCounters(path);
    let plain = false;
    try {
      plain = lstatSync(path).isFile();
    } catch {}
    if (plain) return;
    rmSync(path, { recursive: true, force: true });
    this.write();
  }

  /** The counters as last written. */
  get values(): Readonly<SignalCounters> {
    return { ...this.counters };
  }

  /** One more `command` for the trainer: its counter grows by one and the file is replaced. */
  bump(command: SignalledCommand): SignalCounters {
    this.counters[SIGNAL_COUNTERS[command]]++;
    this.write();
    return this.values;
  }

  private write(): void {
    const body = JSON.stringify(this.counters);
    // Writes are synchronous, so one temporary name per runner process is enough.
    const tmp = `${this.path}.tmp-${process.pid}`;
    // The job directory is the trainer's: whatever it left under the temporary name (a link to a
    // file of the runner's, a FIFO) is removed, never written through.
    rmSync(tmp, { force: true, recursive: true });
    const fd = openSync(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o644);
    try {
      writeSync(fd, body);
      // The reader looks again only when the mtime changed: on a filesystem with coarse times,
      // two writes in one tick would look like one, so each write moves the time on.
      const mtimeMs = fstatSync(fd).mtimeMs;
      if (mtimeMs <= this.lastMtimeMs) {
        const next = (this.lastMtimeMs + 1000) / 1000;
        futimesSync(fd, next, next);
        this.lastMtimeMs += 1000;
      } else this.lastMtimeMs = mtimeMs;
    } finally {
      closeSync(fd);
    }
    try {
      renameSync(tmp, this.path);
    } catch (error) {
      rmSync(tmp, { force: true });
      throw error;
    }
  }
}
