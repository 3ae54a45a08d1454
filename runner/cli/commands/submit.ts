import { createInterface } from "node:readline/promises";
import { InvalidArgumentError, Option, type Command } from "commander";
import type { z } from "zod";
import { ServiceError, type ServiceClient } from "../../../shared/client/client";
import { endpoints } from "../../../shared/client/endpoints";
import type { CloudSubmit, CloudSubmitAnswer } from "../../../shared/schemas/cloud";
import type { LocalSubmitResult } from "../../../shared/schemas/queue";
import { cli } from "../context";
import { submitOnce } from "../submit-once";
import { bytes, duration, expectedStartText, gpuList, runTimeText, usd } from "../format-job";
import { EventPrinter, printFollowed } from "../event-printer";
import { JobNotCompleted, UsageError, type Output } from "../output";

const TARGETS = ["auto", "worker", "local"] as const;

interface SubmitOptions {
  wait: boolean;
  anyGpu?: boolean;
  dryRun?: boolean;
  target: (typeof TARGETS)[number];
  label?: Record<string, string>;
  meta?: Record<string, string>;
  cloud?: string;
  yes?: boolean;
  follow?: boolean;
}

/**
 * Collects repeated `key=value` options into one object (the last value of a key wins); a value
 * without `=` or with an empty key is rejected by commander as a usage error.
 *
 * @example
 * keyValue("gpu=a100*", {}); // { gpu: "a100*" }
 */
export function keyValue(value: string, previous: Record<string, string> = {}): Record<string, string> {
  const at = value.indexOf("=");
  if (at <= 0) throw new InvalidArgumentError("expected key=value.");
  return { ...previous, [value.slice(0, at)]: value.slice(at + 1) };
}

/** `jobs submit`: queues an environment on the local GPUs or remote workers, or with --cloud on a provider. */
export function addSubmit(program: Command): void {
  program
    .command("submit")
    .description("Submit a training environment: run it now, queue it, or (--dry-run) only say what would happen.")
    .argument("<config>", "the environment (training configuration) to run")
    .option("--no-wait", "refuse at once instead of queueing when it cannot start now")
    .option("--any-gpu", "use any free GPUs rather than the environment's configured devices")
    .option("--dry-run", "only show what would happen (GPUs or worker, position, cost for --cloud); nothing is queued")
    .addOption(new Option("--target <target>", "where it may run").choices(TARGETS).default("auto"))
    .option("--label <key=glob>", "a worker label it needs, * matching any characters (repeatable)", keyValue)
    .option("--meta <key=value>", "metadata stored with the job, as strings (repeatable): --meta run_name=lr-sweep-3", keyValue)
    .option("--cloud <provider>", "train on a cloud provider (replicate), or queue for remote workers (workers)")
    .option("--yes", "with --cloud: confirm the upload without asking (review it first with --dry-run)")
    .option("-f, --follow", "then print the job's events live until it ends, as `jobs logs --follow`; exit 0 only if it completed")
    .addHelpText(
      "after",
      `
Exit code 1 when the job is rejected (--no-wait and no room now); the reason is on stderr.

With --follow, what was submitted is said on stderr and stdout carries the job's events (JSON lines
with --format json), a job waiting in the queue or for approval included, until it ends. Exit 0
when it ends completed; 1 when it fails or is cancelled (the end and the job's error on stderr), or
when the submission is rejected. Ctrl-C stops following; the job goes on (\`jobs cancel <id>\`).

Examples:
  $ jobs submit demo
  $ jobs submit demo --follow && echo trained
  $ jobs submit flux-lora --target worker --label gpu=a100* --meta run_name=lr-3e-4
  $ jobs submit flux-lora --dry-run
  $ jobs submit faces --cloud replicate --dry-run && jobs submit faces --cloud replicate --yes`,
    )
    .action(async (config: string, options: SubmitOptions, command: Command) => {
      if (options.follow && options.dryRun) throw new UsageError("--follow cannot go with --dry-run: a dry run starts no job to follow");
      const metadata = options.meta ? { metadata: options.meta } : {};
      const labels = options.label ? { worker_labels: options.label } : {};
      if (options.cloud !== undefined) {
        const localOnly = [
          options.label ? "--label" : null,
          options.anyGpu ? "--any-gpu" : null,
          options.wait ? null : "--no-wait",
          command.getOptionValueSource("target") === "cli" ? "--target" : null,
        ].filter((flag) => flag !== null);
        if (localOnly.length) throw new UsageError(`${localOnly.join(", ")} cannot go with --cloud (they choose local GPUs or workers)`);
        const { out, client } = cli(command);
        const answer = await submitCloud(out, client, { config_name: config, provider: options.cloud, ...metadata }, options);
        if (!answer) return;
        const said = `${answer.job_id} ${answer.status}: ${answer.message}`;
        if (!options.follow) return out.json ? out.printJson(answer) : out.line(said);
        out.note(said);
        return followToEnd(out, client, answer.job_id!);
      }
      const { out, client } = cli(command);
      const answer = await submitOnce(client, endpoints.queueSubmit, {
        body: {
          config_name: config,
          no_wait: !options.wait,
          any_gpu: Boolean(options.anyGpu),
          target: options.target,
          ...labels,
          ...metadata,
          ...(options.dryRun ? { dry_run: true } : {}),
        },
      });
      // An older service ignores dry_run and queues the job: say so rather than print it as a dry run.
      if (options.dryRun && !answer.dry_run)
        throw new Error(`this service does not support --dry-run and queued the job: cancel it with \`jobs cancel ${answer.job_id}\``);
      if (out.json && !options.follow) out.printJson(answer);
      // A rejection is the command's failure: its reason goes to stderr, as main reports errors.
      if (answer.status === "rejected") throw new Error(answer.dry_run ? `dry run: would be ${answer.message}` : answer.message);
      if (options.follow) {
        out.note(describeLocal(answer));
        return followToEnd(out, client, answer.job_id!);
      }
      if (answer.dry_run) {
        if (!out.json) out.table(["PLAN", ""], localPlan(answer));
        if (!out.json) out.note("Dry run: nothing was queued.");
        return;
      }
      if (!out.json) out.line(describeLocal(answer));
    });
}

/**
 * Prints a submitted job's events until it ends: returns when it completed, else throws its end
 * (with the job's error message when it has one) for exit code 1.
 */
export async function followToEnd(out: Output, client: ServiceClient, jobId: string): Promise<void> {
  const status = await printFollowed(new EventPrinter(out), client, jobId, 0);
  if (status === "completed") return out.note(`job ${jobId} ended: completed`);
  throw new JobNotCompleted(jobId, status, await errorMessageOf(client, jobId));
}

/** The job's error message, or null when it has none or it cannot be read now (the end is reported all the same). */
async function errorMessageOf(client: ServiceClient, jobId: string): Promise<string | null> {
  try {
    const job = await client.call(endpoints.queueJob, { params: { job_id: jobId } });
    return "error_message" in job ? job.error_message : null;
  } catch {
    return null;
  }
}

/** One line on what happened to a local or worker submission. */
export function describeLocal(a: z.output<typeof LocalSubmitResult>): string {
  const reason = (message: string) => message.replace(/^(queued|rejected \(no_wait\)):\s*/, "");
  const where = a.worker_id !== null ? `worker ${a.worker_id}` : a.allocated_gpus?.length ? `GPUs ${gpuList(a.allocated_gpus)}` : "the CPU";
  const waits = a.wait_reason ? `${a.wait_reason}: ${reason(a.message)}` : reason(a.message);
  switch (a.status) {
    case "running":
      return `${a.job_id} running on ${where}`;
    case "queued":
      return `${a.job_id} queued at position ${a.queue_position ?? "-"} (${waits})`;
    case "blocked":
      return `${a.job_id} blocked: ${a.message}`;
    case "rejected":
      return `rejected: ${waits}`;
  }
}

type CloudAnswer = z.output<typeof CloudSubmitAnswer>;

/*
 * The plan of a dry run, a row per question a user asks before submitting, each answered from
 * the API's answer only. A cloud dry run's answer carries no queue position or expected start:
 * those rows say so rather than guess.
 */
const NOT_GIVEN = "- (not in the service's dry-run answer)";

/** The plan rows of a local or worker dry run. */
export function localPlan(a: z.output<typeof LocalSubmitResult>): string[][] {
  const where = a.worker_id !== null ? `worker ${a.worker_id}` : a.allocated_gpus?.length ? `GPUs ${gpuList(a.allocated_gpus)}` : null;
  const outcome = {
    running: "would start now",
    queued: "would wait in the queue",
    blocked: "would wait for an admin's approval",
    rejected: "would be refused (--no-wait)",
  }[a.status];
  return [
    ["where", where ?? (a.status === "running" ? "the CPU" : "- (decided when admitted)")],
    ["outcome", outcome],
    ["position", a.queue_position === null ? "-" : String(a.queue_position)],
    ["why", a.status === "running" ? "-" : a.wait_reason ? `${a.wait_reason}: ${a.message}` : a.message],
    ["start", a.status === "running" ? "now" : (expectedStartText(a) ?? "-")],
    ["run time", runTimeText(a) ?? "-"],
    ["cost", "- (local: not billed)"],
  ];
}

/** The plan rows of a cloud dry run. */
function cloudPlan(provider: string, a: CloudAnswer): string[][] {
  const e = a.estimate;
  return [
    ["where", `${provider} (${e.hardware})`],
    ["outcome", a.message],
    ["position", NOT_GIVEN],
    ["why", "-"],
    ["start", NOT_GIVEN],
    ["run time", `${duration(e.expected_seconds)} (the estimate's run time)`],
    ["cost", `about ${usd(e.estimated_cost_usd)} at ${usd(e.rate_usd_per_second)}/s`],
  ];
}

/**
 * A cloud submission's answer (null for a dry run, which it prints). With consent "ask" the
 * service refuses an upload nobody confirmed (consent_required): the CLI then shows the dry run's
 * summary and estimate, asks on a terminal (or takes --yes), and resubmits confirming exactly that
 * summary. With "allow" it goes at once.
 */
async function submitCloud(
  out: Output,
  client: ServiceClient,
  body: z.input<typeof CloudSubmit>,
  options: SubmitOptions,
): Promise<CloudAnswer | null> {
  const provider = body.provider!;
  if (options.dryRun) {
    const dry = await client.call(endpoints.cloudSubmit, { body: { ...body, dry_run: true } });
    if (out.json) {
      out.printJson(dry);
      return null;
    }
    for (const line of summaryLines(dry)) out.line(line);
    out.line();
    out.table(["PLAN", ""], cloudPlan(provider, dry));
    out.note("Dry run: nothing was uploaded or queued.");
    return null;
  }
  let answer: CloudAnswer;
  try {
    answer = await submitOnce(client, endpoints.cloudSubmit, { body });
  } catch (error) {
    if (!(error instanceof ServiceError) || error.code !== "consent_required") throw error;
    const dry = await client.call(endpoints.cloudSubmit, { body: { ...body, dry_run: true } });
    const upload = `${dry.summary.files} file(s), ${bytes(dry.summary.archive_bytes)}`;
    if (!options.yes) {
      if (!process.stdin.isTTY || !out.interactive)
        throw new UsageError(
          `uploads to ${provider} need your confirmation: review them with \`jobs submit ${body.config_name} --cloud ${provider} --dry-run\`, then add --yes`,
        );
      for (const line of summaryLines(dry)) out.note(line);
      if (!(await confirm(`Upload ${upload} to ${provider}? [y/N] `))) throw new Error("not submitted: the upload was not confirmed");
    } else if (!out.json) {
      out.note(`Confirmed with --yes: uploading ${upload} to ${provider}, about ${usd(dry.estimate.estimated_cost_usd)}.`);
    }
    answer = await submitOnce(client, endpoints.cloudSubmit, { body: { ...body, confirm_summary: dry.summary.summary_id } });
  }
  return answer;
}

/** The package summary and cost estimate of a cloud dry run, for people. */
function summaryLines(a: CloudAnswer): string[] {
  const s = a.summary;
  const e = a.estimate;
  const lines = [
    `Package:  ${s.files} file(s), ${bytes(s.bytes)} of datasets, archive ${bytes(s.archive_bytes)} (limit ${bytes(s.archive_limit_bytes)})`,
    ...s.datasets.map((d) => `  ${d.path}: ${d.files} file(s), ${bytes(d.bytes)}`),
  ];
  if (s.excluded.length)
    lines.push(`Excluded: ${s.excluded.length} file(s), never uploaded`, ...s.excluded.map((x) => `  ${x.path} (${x.reason})`));
  lines.push(
    `Estimate: ${e.hardware} at ${usd(e.rate_usd_per_second)}/s for ${duration(e.expected_seconds)}: about ${usd(e.estimated_cost_usd)}`,
    e.spending
      ? `Spending: ${usd(e.spending.remaining_usd)} left of ${usd(e.spending.limit_usd)} this ${e.spending.period}`
      : "Spending: no limit set",
    a.message,
  );
  return lines;
}

/** Asks a yes/no question on the terminal (stderr), default no. */
async function confirm(question: string): Promise<boolean> {
  const prompt = createInterface({ input: process.stdin, output: process.stderr });
  try {
    return /^y(es)?$/i.test((await prompt.question(question)).trim());
  } finally {
    prompt.close();
  }
}
