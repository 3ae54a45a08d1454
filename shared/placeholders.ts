/*
 * Script command lines (--post_checkpoint_script, --post_upload_script,
 * --validation_external_script): split into argv like a shell would split words, and the
 * `{name}` placeholders filled in each word - never run through a shell, so nothing in a value
 * (a prompt, a path) can become a command. Hand-written: shell-quote, the usual package, also
 * expands $VARIABLES and parses | > ; as operators, which is exactly what must not happen here.
 */

/**
 * Words of a command line: whitespace separates, '...' is literal, "..." allows \" and \\,
 * a backslash outside quotes escapes the next character. Throws on an unclosed quote.
 *
 * @example
 * splitCommand(`python "my script.py" --step {global_step}`); // ["python", "my script.py", "--step", "{global_step}"]
 */
export function splitCommand(line: string): string[] {
  const words: string[] = [];
  let word = "";
  let inWord = false;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i]!;
    if (ch === "'") {
      const end = line.indexOf("'", i + 1);
      if (end === -1) throw new Error("unclosed ' in the command");
      word += line.slice(i + 1, end);
      inWord = true;
      i = end;
    } else if (ch === '"') {
      let j = i + 1;
      for (; j < line.length && line[j] !== '"'; j++) {
        if (line[j] === "\\" && (line[j + 1] === '"' || line[j + 1] === "\\")) j++;
        word += line[j];
      }
      if (j >= line.length) throw new Error('unclosed " in the command');
      inWord = true;
      i = j;
    } else if (ch === "\\" && i + 1 < line.length) {
      word += line[++i];
      inWord = true;
    } else if (/\s/.test(ch)) {
      if (inWord) words.push(word);
      word = "";
      inWord = false;
    } else {
      word += ch;
      inWord = true;
    }
  }
  if (inWord) words.push(word);
  return words;
}

/** Fills `{name}` in each word from `values`; names not given are left as they are. */
export function fillPlaceholders(argv: string[], values: Record<string, string>): string[] {
  return argv.map((word) =>
    word.replace(/\{([a-z_][a-z0-9_]*)\}/g, (whole, name: string) => (Object.hasOwn(values, name) ? values[name]! : whole)),
  );
}

export type ScriptKind = "post_checkpoint" | "validation" | "post_upload";

/**
 * The `{name}` placeholder values for a script run, from the job's options and the event that
 * triggered it. `{remote_checkpoint_path}` is empty for validation and post-checkpoint scripts;
 * only the post-upload script gets `{model_type}` and `{lora_type}`.
 */
export function placeholderValues(
  kind: ScriptKind,
  options: Record<string, unknown>,
  event: { localCheckpointPath?: string; globalStep?: number; remoteCheckpointPath?: string },
): Record<string, string> {
  const opt = (name: string) => {
    const v = options[`--${name}`];
    return v === undefined || v === null ? "" : String(v);
  };
  const values: Record<string, string> = {
    local_checkpoint_path: event.localCheckpointPath ?? "",
    global_step: event.globalStep === undefined ? "" : String(event.globalStep),
    tracker_run_name: opt("tracker_run_name"),
    tracker_project_name: opt("tracker_project_name"),
    model_family: opt("model_family"),
    huggingface_path: opt("hub_model_id") || opt("pretrained_model_name_or_path"),
    remote_checkpoint_path: kind === "post_upload" ? (event.remoteCheckpointPath ?? "") : "",
  };
  for (const [name, value] of Object.entries(options)) {
    if (name.startsWith("--validation_") && value !== null && value !== undefined) values[name.slice(2)] = String(value);
  }
  if (kind === "post_upload") {
    values.model_type = opt("model_type");
    values.lora_type = opt("lora_type");
  }
  return values;
}
