/*
 * Options no level below admin may set (README "Security in short"): each one makes the runner
 * execute something the box's operator did not declare. The edge refuses them from anyone else
 * when an environment is saved, on the training forms and at submit; the runner runs a raw
 * command only where its own config allows it.
 */

/** The admin-only options, by name. `--trainer <name>` is not one: the box decides which names exist. */
export const ADMIN_ONLY_OPTIONS = ["--trainer_command"] as const;

/**
 * The admin-only options present (not null or empty) in an option map, in list order.
 *
 * @example
 * adminOnlyOptionsIn({ "--trainer_command": "bash x.sh", "--seed": 1 }); // ["--trainer_command"]
 */
export function adminOnlyOptionsIn(options: Record<string, unknown>): string[] {
  return ADMIN_ONLY_OPTIONS.filter((name) => options[name] !== undefined && options[name] !== null && options[name] !== "");
}
