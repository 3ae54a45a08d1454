import type { Budgets } from "../../shared/schemas/spend";
import type { Database } from "../db/client";
import type { EnvironmentConfig } from "../jobs/prepare";
import { readForSubmissions, type CapacityWithRules } from "./store";

type SubmissionsRead = Awaited<ReturnType<typeof readForSubmissions>>;

/**
 * The longest a kept capacity serves submissions. Limits, rules, workers and environments are
 * kept as long as the capacity version says they are unchanged; this bounds what the version does
 * not cover: the cloud spending committed and running jobs' expected ends, which move as jobs run.
 */
export const READ_CACHE_MS = 2_000;

/**
 * What the Scheduler read for submissions, kept with the capacity version it was read at
 * (capacity_version, moved by the database with any change of limits, rules, environments or
 * workers: migration 0021). A burst of submits then reads the version alone, and nobody has to
 * tell the Scheduler that something changed: a change moves the version, and the next read sees
 * it.
 */
export class CapacityCache {
  private kept: { capacity: CapacityWithRules; at: number } | null = null;
  /** Environments by name, as read at `environmentsVersion`. */
  private environments = new Map<string, EnvironmentConfig>();
  private environmentsVersion = -1;

  /**
   * Keeps a capacity read elsewhere (a pass reads it in full).
   *
   * @example
   * cache.keep(await loadCapacity(db));
   */
  keep(capacity: CapacityWithRules, at = Date.now()): void {
    this.kept = { capacity, at };
    this.keepEnvironments(new Map(), capacity.version);
  }

  /**
   * The capacity and the named environments a group of submissions needs, and the budgets as they
   * are now (never kept): what is kept when the version is unchanged (one small read), else
   * everything read again (one read batch). `ahead`: that small read, started earlier by
   * `readAhead` for these names; used when it found the version kept, else read again.
   *
   * @example
   * const { capacity, configs, budgets } = await cache.read(db, ["sdxl"]);
   */
  async read(
    db: Database,
    names: string[],
    ahead: Promise<SubmissionsRead | null> | null = null,
  ): Promise<{ capacity: CapacityWithRules; configs: Map<string, EnvironmentConfig>; budgets: Budgets }> {
    const at = Date.now();
    const wanted = [...new Set(names)];
    const kept = this.fresh(at);
    const early = ahead && (await ahead);
    // Versions only grow: a read ahead that found a later one says the small read would not serve.
    if (kept && !(early && early.version > kept.version)) {
      const read = early?.version === kept.version ? early : await readForSubmissions(db, false, this.missing(kept, wanted));
      if (read.version === kept.version) {
        this.keepEnvironments(read.environments, read.version);
        return { capacity: kept, configs: this.configs(wanted), budgets: read.budgets };
      }
    }
    const read = await readForSubmissions(db, true, wanted);
    const capacity = read.capacity!;
    this.kept = { capacity, at };
    this.keepEnvironments(read.environments, capacity.version);
    return { capacity, configs: this.configs(wanted), budgets: read.budgets };
  }

  /**
   * Starts now the small read `read` makes for `names` while the kept capacity serves, for a group
   * that will be decided later (the Scheduler reads the next group's while the one before it
   * writes); null when nothing is kept. A failed read answers null: `read` then reads again.
   */
  readAhead(db: Database, names: string[]): Promise<SubmissionsRead | null> | null {
    const kept = this.fresh(Date.now());
    if (!kept) return null;
    return readForSubmissions(db, false, this.missing(kept, [...new Set(names)])).catch(() => null);
  }

  private fresh(at: number): CapacityWithRules | null {
    return this.kept && at - this.kept.at < READ_CACHE_MS ? this.kept.capacity : null;
  }

  /** The names whose environments are not kept for `kept`'s version. */
  private missing(kept: CapacityWithRules, names: string[]): string[] {
    return this.environmentsVersion === kept.version ? names.filter((name) => !this.environments.has(name)) : names;
  }

  private keepEnvironments(read: Map<string, EnvironmentConfig>, version: number): void {
    if (version !== this.environmentsVersion) {
      this.environments.clear();
      this.environmentsVersion = version;
    }
    for (const [name, environment] of read) this.environments.set(name, environment);
  }

  private configs(names: string[]): Map<string, EnvironmentConfig> {
    const configs = new Map<string, EnvironmentConfig>();
    for (const name of names) {
      const environment = this.environments.get(name);
      if (environment) configs.set(name, environment);
    }
    return configs;
  }
}
