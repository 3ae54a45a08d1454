/*
 * Which trainer a job runs, as its environment says (README "Trainers"): `--trainer` names one of
 * the box's (simpletuner, demo, or one its runner config declares); none means SimpleTuner, the
 * default; a raw `--trainer_command` names none. The Scheduler gives a job only to a box whose
 * runner said it can run that trainer (edge/scheduler/plan.ts); the runner launches it
 * (runner/agent/job.ts).
 */

/** The trainer that runs when an environment names none. */
export const DEFAULT_TRAINER = "simpletuner";

/**
 * The trainer a job needs from an option map; null for a raw command (no named trainer: the box
 * decides with allow_raw_commands).
 *
 * @example
 * jobTrainer({ "--trainer": "demo" }); // "demo"
 * jobTrainer({}); // "simpletuner"
 */
export function jobTrainer(config: Record<string, unknown>): string | null {
  const name = config["--trainer"];
  if (typeof name === "string" && name.trim()) return name.trim();
  const command = config["--trainer_command"];
  if (command !== undefined && command !== null && command !== "") return null;
  return DEFAULT_TRAINER;
}
