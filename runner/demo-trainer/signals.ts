import { readFileSync, statSync } from "node:fs";
import { SIGNAL_COUNTERS, type SignalledCommand } from "../../shared/trainer-commands";

/*
 * Commands in, read as SimpleTuner's train.py reads them: the signal file named by
 * SIMPLETUNER_ACCELERATE_SIGNAL_FILE holds a JSON object of counters (manual_validation,
 * manual_checkpoint). At every check the file is statted; the JSON is read again only when its
 * mtime changed; each counter's increase since the last count seen is owed, one action per
 * increment. A missing or unreadable file is a warning, not an error: training goes on.
 */

/** What one check found: actions owed, and a warning to print when something is wrong with the file. */
export interface SignalCheck {
  owed: Record<SignalledCommand, number>;
  warning: string | null;
}

export class SignalWatcher {
  private mtimeMs: number | null = null;
  private readonly seen: Record<SignalledCommand, number> = { validation: 0, checkpoint: 0 };
  /** The last warning given, so a file that stays missing is reported once, not at every step. */
  private warned: string | null = null;

  constructor(private readonly path: string | undefined) {}

  /**
   * The actions asked for since the last check.
   *
   * @example
   * // the runner bumped manual_validation twice since the last step
   * watcher.check(); // { owed: { validation: 2, checkpoint: 0 }, warning: null }
   */
  check(): SignalCheck {
    const owed: Record<SignalledCommand, number> = { validation: 0, checkpoint: 0 };
    if (!this.path) return { owed, warning: null };
    let mtimeMs: number;
    try {
      mtimeMs = statSync(this.path).mtimeMs;
    } catch (error) {
      return {
        owed,
        warning: this.warn(
          `signal file ${this.path} is not there (${(error as NodeJS.ErrnoException).code ?? "unreadable"}); on-demand validations and checkpoints wait for it`,
        ),
      };
    }
    if (mtimeMs === this.mtimeMs) return { owed, warning: null };
    let counters: Record<string, unknown>;
    try {
      counters = JSON.parse(readFileSync(this.path, "utf8")) as Record<string, unknown>;
      if (!counters || typeof counters !== "object" || Array.isArray(counters)) throw new Error("not a JSON object");
    } catch (error) {
      // Not remembered as seen: the next check reads it again.
      return {
        owed,
        warning: this.warn(`signal file ${this.path} is unreadable (${(error as Error).message}); ignoring it until it changes`),
      };
    }
    this.mtimeMs = mtimeMs;
    this.warned = null;
    for (const command of Object.keys(SIGNAL_COUNTERS) as SignalledCommand[]) {
      const value = counters[SIGNAL_COUNTERS[command]];
      if (typeof value !== "number" || !Number.isSafeInteger(value) || value <= this.seen[command]) continue;
      owed[command] = value - this.seen[command];
      this.seen[command] = value;
    }
    return { owed, warning: null };
  }

  private warn(text: string): string | null {
    if (this.warned === text) return null;
    this.warned = text;
    return `WARNING: ${text}`;
  }
}
