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

/** Every live process below `pid` (children, their children, ...), found through /proc. */
export function descendants(pid: number): number[] {
  const parents = new Map<number, number>();
  for (const entry of readdirSync("/proc").filter((e) => /^\d+$/.test(e))) {
    const parent = parentOf(entry);
    if (parent !== null) parents.set(Number(entry), parent);
  }
  const found: number[] = [];
  const walk = (p: number) => {
    for (const [child, parent] of parents) if (parent === p) (found.push(child), walk(child));
  };
  walk(pid);
  return found;
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
