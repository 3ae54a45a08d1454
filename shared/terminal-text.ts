/*
 * A trainer's output shown to people. It was printed for the trainer's own terminal, and what it
 * carries there (colours, a window title, a screen clear, a clipboard write by OSC 52, C1 forms of
 * the same) must do nothing to a reader's terminal or page. Colour codes are removed everywhere:
 * SimpleTuner colours every log line, and they say nothing. Every other control is either removed
 * (stored text: a job's error message) or shown as a visible escape (`jobs logs`, the dashboard's
 * log), so an attempt is seen for what it is.
 */

/** Colour (SGR) sequences: CSI, parameters, `m`; in the 7-bit (ESC [) and 8-bit (C1 CSI) forms. */
const COLOUR = /(?:\x1b\[|\x9b)[0-9;:]*m/g;

/**
 * Every ECMA-48 escape sequence, 7-bit and 8-bit: a control sequence (CSI, parameters,
 * intermediates, final byte); a control string (OSC, DCS, SOS, PM, APC) up to BEL, ST, the next
 * ESC or the line's end; any other escape (ESC, intermediates, final byte).
 */
const SEQUENCE =
  /(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?|\x1b[\x20-\x2f]*[\x30-\x7e]/g;

/** C0 controls but tab and line feed, DEL, and C1 controls. */
const CONTROL_BUT_LINES = /[\x00-\x08\x0b-\x1f\x7f-\x9f]/g;
/** C0 controls but tab, DEL, and C1 controls. */
const CONTROL = /[\x00-\x08\x0a-\x1f\x7f-\x9f]/g;

const escaped = (char: string) => `\\u${char.charCodeAt(0).toString(16).padStart(4, "0")}`;

/**
 * Text without its colour codes; any other control is left as it is.
 *
 * @example
 * stripColour("\x1b[32mloading\x1b[0m model"); // "loading model"
 */
export function stripColour(text: string): string {
  return text.replace(COLOUR, "");
}

/**
 * Text as stored for people to read (a job's error message): lines and tabs kept, every escape
 * sequence and every other control removed.
 *
 * @example
 * plainText("\x1b[31mOSError\x1b[0m: read-only\r\n\x1b]0;owned\x07done"); // "OSError: read-only\ndone"
 */
export function plainText(text: string): string {
  return text.replace(/\r\n/g, "\n").replace(SEQUENCE, "").replace(CONTROL_BUT_LINES, "");
}

/**
 * One line as a terminal may print it: every C0 control but tab (line feeds included), DEL and
 * every C1 control written as a JSON-style `\u00XX` escape, visible and inert.
 *
 * @example
 * showControls("\x1b]0;title\x07"); // "\\u001b]0;title\\u0007"
 */
export function showControls(text: string): string {
  return text.replace(CONTROL, escaped);
}

/**
 * A value as one line of JSON that is also safe on a terminal: JSON.stringify escapes C0 controls
 * already; DEL and the C1 controls are escaped too. It parses to the same value.
 *
 * @example
 * terminalJson({ message: "\x9b2J" }); // '{"message":"\\u009b2J"}'
 */
export function terminalJson(value: unknown, indent?: number): string {
  return JSON.stringify(value, null, indent).replace(/[\x7f-\x9f]/g, escaped);
}
