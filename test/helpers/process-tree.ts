import { readdirSync, readFileSync } from "node:fs";

/** One live process: its id, name, command line and memory (kB). */
export interface TreeProcess {
  pid: number;
  name: string;
  command: string;
  /** Resident set size (VmRSS): counts shared pages (the node binary, libraries) in full in every process. */
  rssKb: number;
  /** Proportional set size (smaps_rollup): shared pages split between the processes sharing them. */
  pssKb: number;
}

function parentOf(pid: string): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
  } catch {
    return null;
  }
}

/**
 * The processes below `root` (children, their children, ...) among `procs`, each given with its
 * parent: what `descendants` finds through /proc, for a caller that has read /proc already.
 *
 * @example
 * below([{ pid: 2, ppid: 1 }, { pid: 3, ppid: 2 }], 1); // [2, 3]
 */
export function below(procs: Iterable<{ pid: number; ppid: number }>, root: number): number[] {
  const children = new Map<number, number[]>();
  for (const { pid, ppid } of procs) children.set(ppid, [...(children.get(ppid) ?? []), pid]);
  const found: number[] = [];
  const walk = (p: number) => {
    for (const child of children.get(p) ?? []) if (child !== p) (found.push(child), walk(child));
  };
  walk(root);
  return found;
}

/** Every live process below `pid` (children, their children, ...), found through /proc. */
export function descendants(pid: number): number[] {
  const procs: { pid: number; ppid: number }[] = [];
  for (const entry of readdirSync("/proc").filter((e) => /^\d+$/.test(e))) {
    const parent = parentOf(entry);
    if (parent !== null) procs.push({ pid: Number(entry), ppid: parent });
  }
  return below(procs, pid);
}

/** `pid` and every process below it, with their memory; a process that ended meanwhile is left out. */
export function processTree(pid: number): TreeProcess[] {
  const tree: TreeProcess[] = [];
  for (const p of [pid, ...descendants(pid)]) {
    try {
      const status = readFileSync(`/proc/${p}/status`, "utf8");
      const rollup = readFileSync(`/proc/${p}/smaps_rollup`, "utf8");
      tree.push({
        pid: p,
        name: /^Name:\s+(.*)$/m.exec(status)?.[1] ?? "?",
        command: readFileSync(`/proc/${p}/cmdline`, "utf8").split("\0").filter(Boolean).join(" "),
        rssKb: Number(/^VmRSS:\s+(\d+)/m.exec(status)?.[1] ?? 0),
        pssKb: Number(/^Pss:\s+(\d+)/m.exec(rollup)?.[1] ?? 0),
      });
    } catch {}
  }
  return tree;
}
