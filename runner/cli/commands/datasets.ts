import type { Command } from "commander";
import type { z } from "zod";
import { endpoints } from "../../../shared/client/endpoints";
import type { DatasetListing } from "../../../shared/schemas/datasets";
import { cli } from "../context";
import { age, bytes } from "../format-job";
import { UsageError } from "../output";
import { batchesOf, collectFiles, uploadBatches } from "../upload";

type Listing = z.output<typeof DatasetListing>;

/** `jobs datasets`: the dataset folders jobs read from: list, upload into, delete. */
export function addDatasets(program: Command): void {
  const datasets = program.command("datasets").description("List, upload and delete dataset files (what dataloaders read).");

  datasets
    .command("list")
    .description("The folders and files directly under a dataset path (default: the root), every page.")
    .argument("[path]", "a folder relative to the datasets root", "")
    .addHelpText("after", "\nFolders end with /.\n\nExamples:\n  $ jobs datasets list\n  $ jobs datasets list portraits/ada")
    .action(async (path: string, _options: object, command: Command) => {
      const { out, client } = cli(command);
      const listing = await wholeListing(path, (query) => client.call(endpoints.datasetList, { query }));
      if (out.json) return out.printJson(listing);
      if (!listing.folders.length && !listing.files.length) return out.note(`Nothing under ${listing.path || "the datasets root"}.`);
      out.table(
        ["NAME", "SIZE", "MODIFIED"],
        [
          ...listing.folders.map((folder) => [`${folder}/`, "-", "-"]),
          ...listing.files.map((file) => [file.name, bytes(file.size), `${age(file.uploaded)} ago`]),
        ],
      );
    });

  datasets
    .command("upload")
    .description(
      "Upload files and folders (folders recursed, relative paths kept; a .zip is extracted by the service) into a dataset folder.",
    )
    .argument("<paths...>", "files, folders and .zip files to send")
    .requiredOption("--to <folder>", "the dataset folder to upload into, relative to the datasets root")
    .addHelpText(
      "after",
      `
A folder arrives under its own name: \`upload ./ada --to portraits\` stores portraits/ada/...
Hidden files and folders inside a folder are skipped. Files go in batches (a folder at a time,
at most 16 MiB each); a refused file does not stop the others: each failure is named on stderr
and the exit code is 1. On a terminal, bytes sent of the total are shown on stderr.

Examples:
  $ jobs datasets upload ./ada ./bea --to portraits
  $ jobs datasets upload photos.zip --to portraits/carl`,
    )
    .action(async (paths: string[], options: { to: string }, command: Command) => {
      if (!options.to.trim()) throw new UsageError("--to needs a dataset folder, for example --to portraits");
      const files = collectFiles(paths, options.to);
      const { out, client } = cli(command);
      const total = files.reduce((sum, f) => sum + f.size, 0);
      let last = "";
      const progress = (sent: number) => {
        if (!out.interactive || out.json) return;
        const line = `\r${bytes(sent)} of ${bytes(total)} sent (${total ? Math.floor((sent / total) * 100) : 100}%)`;
        if (line !== last) out.stderr.write((last = line));
      };
      const outcome = await uploadBatches(client, batchesOf(files), progress);
      if (last) out.stderr.write("\n");
      const stored = outcome.stored.flatMap((answer) => answer.files);
      const skipped = outcome.stored.flatMap((answer) => answer.skipped);
      if (out.json) out.printJson(outcome);
      else {
        out.line(
          `Uploaded ${stored.length} file${stored.length === 1 ? "" : "s"} (${bytes(stored.reduce((s, f) => s + f.size, 0))}) to ${options.to}`,
        );
        if (skipped.length) out.note(`Skipped in zips: ${skipped.join(", ")}`);
      }
      if (outcome.failed.length) {
        for (const failure of outcome.failed) out.note(`failed: ${failure.path}: ${failure.reason}`);
        throw new Error(`${outcome.failed.length} of ${files.length} file${files.length === 1 ? "" : "s"} not uploaded`);
      }
    });

  datasets
    .command("rm")
    .description("Delete a dataset file, or a folder with everything under it (its owner, leads and admins).")
    .argument("<path>", "relative to the datasets root")
    .addHelpText("after", "\nExample:\n  $ jobs datasets rm portraits/ada/old.png")
    .action(async (path: string, _options: object, command: Command) => {
      const { out, client } = cli(command);
      const answer = await client.call(endpoints.datasetDelete, { query: { path } });
      if (out.json) return out.printJson(answer);
      out.line(
        `Deleted ${answer.path}: ${answer.deleted_files} file${answer.deleted_files === 1 ? "" : "s"}, ${bytes(answer.deleted_bytes)}`,
      );
    });
}

/** Every page of a folder's listing in one answer of the same shape (next_cursor null). */
async function wholeListing(
  path: string,
  page: (query: { path?: string; cursor?: string; limit: number }) => Promise<Listing>,
): Promise<Listing> {
  let answer = await page({ path, limit: 1000 });
  const whole: Listing = { ...answer, folders: [...answer.folders], files: [...answer.files] };
  while (answer.next_cursor !== null) {
    answer = await page({ cursor: answer.next_cursor, limit: 1000 });
    whole.folders.push(...answer.folders);
    whole.files.push(...answer.files);
  }
  return { ...whole, next_cursor: null };
}
