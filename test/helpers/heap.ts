import WebSocket from "ws";

/*
 * The Worker's heap, read through workerd's V8 inspector (a stack started with `inspector`): a
 * heap snapshot in V8's format, and what a test asks of it.
 */

interface HeapSnapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[]]; edge_fields: string[]; edge_types: [string[]] } };
  nodes: number[];
  edges: number[];
  strings: string[];
}

/** A heap snapshot of the isolate that runs the Worker and its Durable Objects (inspector target `core:user:`). */
export async function workerHeapSnapshot(inspectorUrl: URL): Promise<HeapSnapshot> {
  const targets = (await (await fetch(new URL("/json", inspectorUrl.href.replace(/^ws/, "http")))).json()) as {
    title: string;
    webSocketDebuggerUrl: string;
  }[];
  const target = targets.find((t) => t.title.includes("core:user:"));
  if (!target) throw new Error(`no Worker among the inspector's targets: ${targets.map((t) => t.title).join(", ")}`);
  const socket = new WebSocket(target.webSocketDebuggerUrl);
  await new Promise((open, fail) => (socket.once("open", open), socket.once("error", fail)));
  const chunks: string[] = [];
  try {
    await new Promise<void>((done, fail) => {
      socket.on("message", (data) => {
        const message = JSON.parse(String(data)) as { id?: number; method?: string; params?: { chunk: string }; error?: unknown };
        if (message.method === "HeapProfiler.addHeapSnapshotChunk") chunks.push(message.params!.chunk);
        if (message.id === 1) message.error ? fail(new Error(JSON.stringify(message.error))) : done();
      });
      socket.send(JSON.stringify({ id: 1, method: "HeapProfiler.takeHeapSnapshot", params: { reportProgress: false } }));
    });
  } finally {
    socket.close();
  }
  return JSON.parse(chunks.join("")) as HeapSnapshot;
}

/**
 * The longest chain of promises in the heap where each is the one the previous one's reaction
 * settles (A.then(...) gives B, B.then(...) gives C, ...): pending promises waiting on one another.
 */
export function longestPromiseChain(heap: HeapSnapshot): number {
  const { meta } = heap.snapshot;
  const nodeWidth = meta.node_fields.length;
  const edgeWidth = meta.edge_fields.length;
  const [typeAt, nameAt, edgeCountAt] = ["type", "name", "edge_count"].map((f) => meta.node_fields.indexOf(f));
  const [edgeNameAt, edgeToAt, edgeTypeAt] = ["name_or_index", "to_node", "type"].map((f) => meta.edge_fields.indexOf(f));
  const name = (node: number) => heap.strings[heap.nodes[node + nameAt!]!]!;
  const isPromise = (node: number) => meta.node_types[0][heap.nodes[node + typeAt!]!] === "object" && name(node) === "Promise";
  const firstEdge = new Map<number, number>();
  for (let node = 0, edge = 0; node < heap.nodes.length; node += nodeWidth) {
    firstEdge.set(node, edge);
    edge += heap.nodes[node + edgeCountAt!]! * edgeWidth;
  }
  const edgesOf = function* (node: number) {
    const first = firstEdge.get(node)!;
    for (let k = 0; k < heap.nodes[node + edgeCountAt!]!; k++) {
      const edge = first + k * edgeWidth;
      const type = meta.edge_types[0][heap.edges[edge + edgeTypeAt!]!];
      const label = type === "element" || type === "hidden" ? "" : heap.strings[heap.edges[edge + edgeNameAt!]!];
      yield { label, to: heap.edges[edge + edgeToAt!]! };
    }
  };
  // Each promise with a reaction, to the promise that reaction settles.
  const next = new Map<number, number>();
  for (let node = 0; node < heap.nodes.length; node += nodeWidth) {
    if (!isPromise(node)) continue;
    let reaction: number | undefined;
    for (const edge of edgesOf(node)) if (edge.label === "reactions_or_result") reaction = edge.to;
    if (reaction === undefined || !name(reaction).includes("PromiseReaction")) continue;
    for (const edge of edgesOf(reaction)) if (isPromise(edge.to)) next.set(node, edge.to);
  }
  const settled = new Set(next.values());
  let longest = 0;
  for (const head of next.keys()) {
    if (settled.has(head)) continue;
    let length = 1;
    for (let p = next.get(head); p !== undefined && length <= next.size; p = next.get(p)) length++;
    longest = Math.max(longest, length);
  }
  return longest;
}
