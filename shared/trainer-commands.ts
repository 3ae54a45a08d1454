/*
 * The commands a running job's trainer takes, named once for the edge, the runner and
 * the demo trainer. Validation and checkpoint reach the trainer through SimpleTuner's own signal
 * file (README "The trainer protocol"); stop is a signal, never a file entry.
 */

/** What POST /api/training/{validation,checkpoint}/run and /stop queue for a running job. */
export const TRAINER_COMMANDS = ["validation", "checkpoint", "stop"] as const;
export type TrainerCommand = (typeof TRAINER_COMMANDS)[number];

/** The commands that travel in the signal file; stop is asked with a signal instead. */
export type SignalledCommand = Exclude<TrainerCommand, "stop">;

/** The environment variable SimpleTuner's train.py reads the signal file's path from. */
export const SIGNAL_FILE_ENV = "SIMPLETUNER_ACCELERATE_SIGNAL_FILE";

/**
 * The signal file's counter for each signalled command: the trainer owes one action per increase.
 *
 * @example
 * SIGNAL_COUNTERS.validation; // "manual_validation"
 */
export const SIGNAL_COUNTERS = { validation: "manual_validation", checkpoint: "manual_checkpoint" } as const satisfies Record<
  SignalledCommand,
  string
>;
export type SignalCounters = Record<(typeof SIGNAL_COUNTERS)[SignalledCommand], number>;
