import { OptionName } from "../../shared/schemas/environments";
import type { ConfigOptions } from "../../shared/schemas/environments";
import { UsageError } from "./output";

type OptionValue = ConfigOptions[string];

/** The changes `jobs env set` asks for: options to set (in order) and options to remove. */
export interface OptionChanges {
  set: [string, OptionValue][];
  unset: string[];
}

/**
 * Reads `--key value`, `--key=value`, a bare `--flag` (true) and `--unset --key` from the words
 * after `jobs env set <name>`. A value is read as `jobs env show` prints it: JSON when it is a
 * JSON number, boolean, null or quoted string (`16`, `false`, `"16"`), else the text as it is.
 * A word that is not an option where one is expected, or a name the API would refuse, is a
 * usage error, so nothing is sent.
 *
 * @example
 * optionChanges(["--lora_rank", "16", "--unset", "--hub_token"]); // { set: [["--lora_rank", 16]], unset: ["--hub_token"] }
 */
export function optionChanges(words: string[]): OptionChanges {
  const changes: OptionChanges = { set: [], unset: [] };
  const name = (word: string) => {
    if (!OptionName.safeParse(word).success)
      throw new UsageError(`${JSON.stringify(word)} is not an option name: options look like --learning_rate (letters, digits, _ and -)`);
    return word;
  };
  for (let i = 0; i < words.length; i++) {
    const word = words[i]!;
    if (!word.startsWith("--")) throw new UsageError(`expected an option such as --learning_rate, not ${JSON.stringify(word)}`);
    if (word === "--unset") {
      const target = words[++i];
      if (target === undefined) throw new UsageError("--unset needs the option to remove: --unset --hub_token");
      changes.unset.push(name(target));
      continue;
    }
    const equals = word.indexOf("=");
    if (equals > 0) {
      changes.set.push([name(word.slice(0, equals)), optionValue(word.slice(equals + 1))]);
    } else if (words[i + 1] === undefined || words[i + 1]!.startsWith("--")) {
      changes.set.push([name(word), true]);
    } else {
      changes.set.push([name(word), optionValue(words[++i]!)]);
    }
  }
  const both = changes.set.map(([key]) => key).filter((key) => changes.unset.includes(key));
  if (both.length) throw new UsageError(`${both.join(", ")} is both set and unset`);
  if (!changes.set.length && !changes.unset.length)
    throw new UsageError("nothing to change: give options to set (--key value) or to remove (--unset --key)");
  return changes;
}

/** A value typed on the command line, as `jobs env show` prints it (see optionChanges). */
export function optionValue(text: string): OptionValue {
  try {
    const value: unknown = JSON.parse(text);
    if (value === null || ["string", "number", "boolean"].includes(typeof value)) return value as OptionValue;
  } catch {
    // not JSON: the text itself
  }
  return text;
}
