import { InvalidArgumentError, Option, type Command } from "commander";
import { endpoints } from "../../../shared/client/endpoints";
import { ACTIVE_STATUSES } from "../../../shared/schemas/queue";
import { cli } from "../context";
import { fieldValue, parseFields, selectFields } from "../fields";
import { age, cell, gpusCell } from "../format-job";
import { allEntries } from "../queue-pages";

interface ListOptions {
  status?: (typeof ACTIVE_STATUSES)[number];
  limit: number;
  all?: boolean;
  completed?: boolean;
  user?: string;
  fields?: string;
}

/** A page size the API takes (1 to 1000), checked before any call. */
export function pageSize(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isInteger(n) || n < 1 || n > 1000)
    throw new InvalidArgumentError("expected a whole number from 1 to 1000.");
  return n;
}

const DEFAULT_HEADERS = ["JOB ID", "USER", "STATUS", "PRIO", "POS", "GPUS", "CONFIG", "WAIT", "AGE"];

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
    .addHelpText(
      "after",
      `
Columns: JOB ID, USER, STATUS, PRIO (effective priority), POS (queue position), GPUS (held, or wanted),
CONFIG, WAIT (why it waits), AGE (since it was queued). Other users' jobs show only public fields ("-").

Examples:
  $ jobs list --status pending
  $ jobs list --all -o job_id,status,metadata.run_name --format json`,
    )
    .action(async (options: ListOptions, command: Command) => {
      // Field names are checked before any call, so a typo costs no request.
      const fields = options.fields === undefined ? null : parseFields(options.fields);
      const { out, client } = cli(command);
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

      if (out.json) return out.printJson(fields ? entries.map((entry) => selectFields(entry, fields)) : entries);
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
            e.status,
            String(e.effective_priority),
            cell(e.position),
            gpusCell(e),
            cell(fieldValue(e, "config_name")),
            cell(e.wait_reason),
            age(e.queued_at, now),
          ]),
        );
      }
      if (total > entries.length) out.note(`Showing ${entries.length} of ${total} jobs: add --all for every page.`);
    });
}
