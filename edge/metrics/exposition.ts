/*
 * The Prometheus text exposition format, version 0.0.4: per family a `# HELP` and a `# TYPE`
 * line, then one line per sample. Pure: no I/O, no knowledge of where the numbers come from.
 */

export const EXPOSITION_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

export interface Sample {
  labels?: Record<string, string>;
  value: number;
}

export interface MetricFamily {
  name: string;
  type: "counter" | "gauge";
  help: string;
  /** None is valid: the family is announced (HELP and TYPE) with no values yet. */
  samples: Sample[];
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/** A label value inside double quotes: backslash, double quote and line feed escaped. */
export function escapeLabelValue(value: string): string {
  return value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
}

// HELP text escapes backslash and line feed only (a quote is literal there).
function escapeHelp(text: string): string {
  return text.replace(/\\/g, "\\\\").replace(/\n/g, "\\n");
}

function formatValue(value: number): string {
  if (Number.isNaN(value)) return "NaN";
  if (value === Infinity) return "+Inf";
  if (value === -Infinity) return "-Inf";
  return String(value);
}

function formatLabels(labels: Record<string, string> | undefined): string {
  const entries = Object.entries(labels ?? {});
  if (!entries.length) return "";
  return `{${entries.map(([name, value]) => `${name}="${escapeLabelValue(value)}"`).join(",")}}`;
}

/**
 * Renders families as one exposition; every line, the last included, ends with a line feed.
 * Throws on a metric or label name the format cannot carry (a programming error, not input).
 *
 * @example
 * renderExposition([{ name: "up_total", type: "counter", help: "Starts", samples: [{ value: 1 }] }]);
 * // "# HELP up_total Starts\n# TYPE up_total counter\nup_total 1\n"
 */
export function renderExposition(families: readonly MetricFamily[]): string {
  const lines: string[] = [];
  for (const family of families) {
    if (!NAME.test(family.name)) throw new Error(`invalid metric name ${JSON.stringify(family.name)}`);
    lines.push(`# HELP ${family.name} ${escapeHelp(family.help)}`, `# TYPE ${family.name} ${family.type}`);
    for (const sample of family.samples) {
      for (const label of Object.keys(sample.labels ?? {}))
        if (!LABEL_NAME.test(label)) throw new Error(`invalid label name ${JSON.stringify(label)} on ${family.name}`);
      lines.push(`${family.name}${formatLabels(sample.labels)} ${formatValue(sample.value)}`);
    }
  }
  return lines.map((line) => `${line}\n`).join("");
}
