import type { z } from "zod";
import type { ServiceClient } from "../../shared/client/client";
import type { EndpointInput } from "../../shared/client/endpoint";
import { endpoints } from "../../shared/client/endpoints";
import type { QueueList } from "../../shared/schemas/queue";

type Query = NonNullable<EndpointInput<typeof endpoints.queueList>["query"]>;
type Entry = z.output<typeof QueueList>["jobs"][number];

/**
 * Every entry of GET /api/queue matching `query`, page after page through next_cursor, in the
 * order the entries were submitted: that order lists each matching entry exactly once, however
 * the queue changes meanwhile (the route's documentation), where the scheduling order may skip
 * or repeat a job that moves. `limit` is the page size.
 *
 * @example
 * const mine = await allEntries(client, { user: "alice", status: "pending", limit: 200 });
 */
export async function allEntries(client: ServiceClient, query: Query): Promise<Entry[]> {
  const entries: Entry[] = [];
  let cursor: string | null = null;
  do {
    // Later pages repeat the first page's filters (the route accepts the same ones with a cursor),
    // so no filter is lost should a cursor not carry it.
    const page: z.output<typeof QueueList> = await client.call(endpoints.queueList, {
      query: { ...query, order: "submitted", ...(cursor === null ? {} : { cursor }) },
    });
    entries.push(...page.jobs);
    cursor = page.next_cursor;
  } while (cursor !== null);
  return entries;
}
