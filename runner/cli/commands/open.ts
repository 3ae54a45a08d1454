import { spawn } from "node:child_process";
import type { Command } from "commander";
import { connectionOf, outputOf } from "../context";

interface OpenOptions {
  browser?: boolean;
}

/** The dashboard's page of a job (the dashboard's `#/jobs/<id>` route). */
export const jobPageUrl = (serviceUrl: string, jobId: string) => `${serviceUrl.replace(/\/+$/, "")}/#/jobs/${encodeURIComponent(jobId)}`;

/** `jobs open`: prints a job's dashboard page, and opens it in a browser only when asked. */
export function addOpen(program: Command): void {
  program
    .command("open")
    .description("Print the dashboard page of a job; --browser opens it too.")
    .argument("<job_id>", "the job")
    .option("--browser", "open the page with xdg-open (open on macOS)")
    .addHelpText("after", "\nExamples:\n  $ jobs open local-3f9c2a1b04de\n  $ jobs open local-3f9c2a1b04de --browser")
    .action(async (jobId: string, options: OpenOptions, command: Command) => {
      const out = outputOf(command);
      const url = jobPageUrl(connectionOf(command, false).url, jobId);
      if (out.json) out.printJson({ job_id: jobId, url });
      else out.line(url);
      if (options.browser) await openInBrowser(url);
    });
}

function openInBrowser(url: string): Promise<void> {
  const opener = process.platform === "darwin" ? "open" : "xdg-open";
  return new Promise((resolve, reject) => {
    const child = spawn(opener, [url], { stdio: "ignore", detached: true });
    child.on("error", (error) => reject(new Error(`could not run ${opener}: ${error.message}`)));
    child.on("spawn", () => {
      child.unref();
      resolve();
    });
  });
}
