import { InvalidArgumentError, Option, type Command } from "commander";
import type { ServiceClient } from "../../../shared/client/client";
import { endpoints } from "../../../shared/client/endpoints";
import { readEventStream } from "../../../shared/client/event-stream";
import { ACTIVE_STATUSES } from "../../../shared/schemas/queue";
import { terminalJson } from "../../../shared/terminal-text";
import { cli } from "../context";
import type { Output } from "../output";
import { fieldValue, parseFields, selectFields } from "../fields";
import { age, cell, gpusCell, startCell } from "../format-job";
import { allEntries } from "../queue-pages";

interface ListOptions {
  status?: (typeof ACTIVE_STATUSES)[number];
  limit: number;
  all?: boolean;
  completed?: boolean;
  user?: string;
  fields?: string;
  watch?: boolean;
}

/** A page size the API takes (1 to 1000), checked before any call. */
export function pageSize(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isInteger(n) || n < 1 || n > 1000)
    throw new InvalidArgumentError("expected a whole number from 1 to 1000.");
  return n;
}

const DEFAULT_HEADERS = ["JOB ID", "USER", "STATUS", "PRIO", "POS", "GPUS", "CONFIG", "WAIT", "START", "AGE"];

/** `jobs list`: the queue as a table sized to the terminal, or JSON; -o picks the fields. */
export function addList(program: Command): void {
  program
    .command("list")
    .description("List the queue: running, pending and blocked jobs (and, with --completed, ended ones).")
    .addOption(new Option("--status <status>", "only jobs in this status").choices(ACTIVE_STATUSES))
    .addOption(new Option("-l, --limit <n>", "at most this many jobs (with --all: the page size)").argParser(pageSize).default(50))
    .option("--all", "every matching job, walking all pages")
    .option("--completed", "also list completed, failed and cancelled jobs")
    .option("--user <name>", "only this user's jobs")
    .option("-o, --fields <fields>", "comma-separated fields to show: any queue entry field, or metadata.<key> (any depth)")
    .option("-w, --watch", "print the list again whenever jobs change (the queue's change stream); Ctrl-C ends it")
    .addHelpText(
      "after",
      `
Columns: JOB ID, USER, STATUS ("running STALLED": no training step past the stall threshold),
PRIO (effective priority), POS (queue position), GPUS (held, or wanted), CONFIG, WAIT (why it waits),
START (when a waiting job is expected to start, "unknown" when the service cannot say: \`jobs status <id>\`
says why), AGE (since it was queued). Other users' jobs show only public fields ("-").
With --watch, each new list follows a blank line (on a terminal it replaces the screen); with
--format json, each list is one line of JSON.

Examples:
  $ jobs list --status pending
  $ jobs list --watch
  $ jobs list --all -o job_id,status,metadata.run_name --format json`,
    )
    .action(async (options: ListOptions, command: Command) => {
      // Field names are checked before any call, so a typo costs no request.
      const fields = options.fields === undefined ? null : parseFields(options.fields);
      const { out, client } = cli(command);
      const show = () => showQueue(client, out, options, fields);
      if (options.watch) return watchQueue(client, out, show);
      await show();
    });
}

/** One list of the queue, as the options ask. */
async function showQueue(client: ServiceClient, out: Output, options: ListOptions, fields: string[] | null): Promise<void> {
  const query = {
    limit: options.limit,
    ...(options.status ? { status: options.status } : {}),
    ...(options.completed ? { include_completed: true } : {}),
    ...(options.user ? { user: options.user } : {}),
  };
  let entries;
  let total: number;
  if (options.all) {
    entries = await allEntries(client, query);
    total = entries.length;
  } else {
    const page = await client.call(endpoints.queueList, { query });
    entries = page.jobs;
    total = page.total;
  }

  if (out.json) {
    const value = fields ? entries.map((entry) => selectFields(entry, fields)) : entries;
    return options.watch ? out.line(terminalJson(value)) : out.printJson(value);
  }
  if (entries.length === 0) return out.note("No jobs.");
  if (fields) {
    out.table(
      fields.map((field) => field.toUpperCase()),
      entries.map((entry) => fields.map((field) => cell(fieldValue(entry, field)))),
    );
  } else {
    const now = new Date();
    out.table(
      DEFAULT_HEADERS,
      entries.map((e) => [
        e.job_id,
        cell(e.owner),
        "stalled_since" in e && e.stalled_since ? `${e.status} STALLED` : e.status,
        String(e.effective_priority),
        cell(e.position),
        gpusCell(e),
        cell(fieldValue(e, "config_name")),
        cell(e.wait_reason),
        startCell(e, now),
        age(e.queued_at, now),
      ]),
    );
  }
  if (total > entries.length) out.note(`Showing ${entries.length} of ${total} jobs: add --all for every page.`);
}

const CLEAR_SCREEN = "\u001b[H\u001b[2J";

/**
 * Shows the queue, then again after every change the queue's change stream announces; when the
 * stream ends (a restart, a dropped connection) it reconnects and shows the queue again, since
 * changes are not replayed. Runs until the process is interrupted.
 */
async function watchQueue(client: ServiceClient, out: Output, show: () => Promise<void>): Promise<never> {
  let first = true;
  const refresh = async () => {
    if (!first && !out.json) out.line(out.columns === null ? "" : CLEAR_SCREEN);
    first = false;
    await show();
  };
  // Changes that arrive while the list is being read coalesce into one more read (a burst of 500
  // submissions is a few lists, not 500); a failed read ends the command as before.
  let running: Promise<void> | null = null;
  let again = false;
  const state: { failed: { error: unknown } | null } = { failed: null };
  const request = () => {
    if (state.failed) throw state.failed.error;
    if (running) return void (again = true);
    running = (async () => {
      do {
        again = false;
        await refresh();
      } while (again);
    })()
      .catch((error: unknown) => void (state.failed = { error }))
      .finally(() => (running = null));
  };
  for (;;) {
    const response: Response = await client.call(endpoints.queueChanges, {}, { timeoutMs: null });
    // Shown once the stream is open, so no change between the list and the subscription is missed.
    for await (const message of readEventStream(response)) if (message.event === "ready" || message.event === "change") request();
    await running;
    if (state.failed) throw state.failed.error;
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}
