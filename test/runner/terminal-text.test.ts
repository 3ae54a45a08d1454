// How a trainer's terminal output is made text (shared/terminal-text.ts): pure functions.
import { describe, expect, it } from "vitest";
import { plainText, showControls, stripColour, terminalJson } from "../../shared/terminal-text";

describe("terminal text", () => {
  it("removes colour codes only, in the 7-bit and the C1 form", () => {
    expect(stripColour("\x1b[1;32mok\x1b[0m \x9b31mred\x1b[m \x1b[2J")).toBe("ok red \x1b[2J");
  });

  it("stores plain text: every escape sequence and control removed, lines and tabs kept", () => {
    const hostile = [
      "\x1b[31mOSError\x1b[0m:\tread-only\r",
      "\x1b]0;title\x07\x1b]52;c;cm0gLXJmIH4=\x1b\\clip\x9d8;;https://evil.example\x9clink",
      "\x1bP+q544e\x1b\\dcs \x1b(Bcharset \x1b7saved\x1b8 \x1b[?1049hscreen\x07\x7f\x00",
      "\x1b]0;never terminated",
      "next line",
    ].join("\n");
    expect(plainText(hostile)).toBe("OSError:\tread-only\ncliplink\ndcs charset saved screen\n\nnext line");
  });

  it("shows every other control as a \\u escape, line feeds included, tabs kept", () => {
    expect(showControls("a\tb\nc\x1b[2Jd\x9be\x7ff\x00")).toBe("a\tb\\u000ac\\u001b[2Jd\\u009be\\u007ff\\u0000");
    expect(showControls("loading model (2 images)")).toBe("loading model (2 images)");
  });

  it("writes JSON with DEL and C1 escaped, which parses to the same value", () => {
    const value = { message: "\x1b]0;t\x07 \x9b2J \x7f é", n: 1 };
    const text = terminalJson(value);
    expect(text).toBe('{"message":"\\u001b]0;t\\u0007 \\u009b2J \\u007f é","n":1}');
    expect(JSON.parse(text)).toEqual(value);
    expect(JSON.parse(terminalJson(value, 2))).toEqual(value);
  });
});
