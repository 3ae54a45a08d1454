import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";
import { REPO_ROOT } from "../../edge/local/bundle";
import { sessionCookie, type TestStack } from "./stack";
import { prerequisite } from "./prerequisites";

/** Debian's chromium (`.ci/run` installs it); without it the browser tests are skipped. */
export const CHROMIUM = "/usr/bin/chromium";
export const HAS_CHROMIUM = prerequisite(`chromium (${CHROMIUM})`, existsSync(CHROMIUM));

/** Where the browser tests write their screenshots for a person to look at (ignored by git). */
export const SCREENSHOT_DIR = join(REPO_ROOT, ".build", "test-output", "ui");

/**
 * Headless Debian chromium. The flags keep it off the network (this machine has none beyond
 * loopback) and let it run as root in CI.
 */
export function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--disable-dev-shm-usage",
    ],
  });
}

export interface DashboardPage {
  page: Page;
  context: BrowserContext;
  /**
   * Script errors and Content-Security-Policy violations the page reported so far (not the
   * console's "Failed to load resource" lines: a refused API call is shown by the page itself).
   */
  problems: string[];
  close(): Promise<void>;
}

/**
 * A new browser context on the dashboard at 1280x800 (or `viewport`), logged in as `cookie`'s
 * session when given (else at the login form), opened at `hash` (`#/queue`).
 */
export async function openDashboard(
  browser: Browser,
  t: TestStack,
  options: { cookie?: string; hash?: string; viewport?: { width: number; height: number }; colorScheme?: "light" | "dark" } = {},
): Promise<DashboardPage> {
  const context = await browser.newContext({
    viewport: options.viewport ?? { width: 1280, height: 800 },
    colorScheme: options.colorScheme ?? "light",
  });
  if (options.cookie) {
    const [name, ...value] = options.cookie.split("=");
    await context.addCookies([{ name: name!, value: value.join("="), url: t.base }]);
  }
  const page = await context.newPage();
  const problems: string[] = [];
  page.on("console", (message) => {
    if (message.type() === "error" && !message.text().startsWith("Failed to load resource")) problems.push(message.text());
  });
  page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
  await page.goto(`${t.base}/${options.hash ?? ""}`);
  return { page, context, problems, close: () => context.close() };
}

/** Logs in through the API and returns the session cookie (`name=value`) for openDashboard. */
export async function sessionOf(t: TestStack, username: string, password: string): Promise<string> {
  const login = await t.call("POST", "/api/cloud/auth/login", { json: { username, password } });
  if (login.status !== 200) throw new Error(`login ${username}: ${login.status} ${login.text}`);
  return sessionCookie(login);
}

const require = createRequire(import.meta.url);
let axeSource: string | undefined;

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: string[];
}

/**
 * Runs axe-core in the page (injected through the DevTools protocol, which the page's CSP does not
 * govern) and answers its serious and critical violations, each with the elements concerned.
 */
export async function seriousA11yViolations(page: Page): Promise<AxeViolation[]> {
  axeSource ??= readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");
  await page.evaluate(axeSource);
  const violations = await page.evaluate(async () => {
    const axe = (globalThis as unknown as { axe: { run: (context: unknown, options: unknown) => Promise<{ violations: any[] }> } }).axe;
    const result = await axe.run(document, { resultTypes: ["violations"] });
    return result.violations.map((v) => ({
      id: v.id as string,
      impact: v.impact as string | null,
      help: v.help as string,
      nodes: (v.nodes as { target: string[] }[]).map((n) => n.target.join(" ")),
    }));
  });
  return violations.filter((v) => v.impact === "serious" || v.impact === "critical");
}

/** Saves a full-page screenshot as `<name>.png` under SCREENSHOT_DIR and answers its path. */
export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  const path = join(SCREENSHOT_DIR, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}
