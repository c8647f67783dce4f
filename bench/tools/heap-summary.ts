/**
 * Summarises a V8 heap snapshot (`--heapsnapshot-signal`, `v8.writeHeapSnapshot`)
 * without DevTools: self size by node type and constructor name, the
 * largest single nodes with one retainer path each, and the JS source files
 * whose compiled code and closures take the most (by script name), so that
 * "what does an idle sidecar hold" and "what holds the buffers mid-list"
 * can be answered from a terminal.
 *
 *   node bench/tools/heap-summary.ts FILE.heapsnapshot [--top 25] [--diff OTHER.heapsnapshot]
 *
 * With --diff, rows are FILE minus OTHER (what grew).
 */
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]]; edge_fields: string[]; edge_types: [string[], ...unknown[]] } };
  nodes: number[];
  edges: number[];
  strings: string[];
}

export interface HeapSummary {
  readonly total: number;
  /** `type:name` → [count, self bytes]. */
  readonly groups: Map<string, [number, number]>;
  readonly largest: ReadonlyArray<{ readonly what: string; readonly size: number; readonly path: string }>;
}

export function summarizeSnapshot(file: string, top = 25): HeapSummary {
  const s = JSON.parse(readFileSync(file, "utf8")) as Snapshot;
  const nf = s.snapshot.meta.node_fields;
  const ef = s.snapshot.meta.edge_fields;
  const types = s.snapshot.meta.node_types[0];
  const edgeTypes = s.snapshot.meta.edge_types[0];
  const N = nf.length;
  const E = ef.length;
  const iType = nf.indexOf("type");
  const iName = nf.indexOf("name");
  const iSize = nf.indexOf("self_size");
  const iEdges = nf.indexOf("edge_count");
  const eType = ef.indexOf("type");
  const eName = ef.indexOf("name_or_index");
  const eTo = ef.indexOf("to_node");
  const count = s.nodes.length / N;
  const nameOf = (n: number): string => {
    const t = types[s.nodes[n * N + iType] ?? 0] ?? "?";
    const name = s.strings[s.nodes[n * N + iName] ?? 0] ?? "";
    return `${t}:${t === "string" || t === "concatenated string" || t === "sliced string" ? "(string)" : name.slice(0, 80)}`;
  };
  // One retainer per node (the first edge found), for a path to a root.
  const retainer = new Int32Array(count).fill(-1);
  const retainerEdge = new Array<string>(count);
  let edge = 0;
  for (let n = 0; n < count; n++) {
    const edges = s.nodes[n * N + iEdges] ?? 0;
    for (let k = 0; k < edges; k++, edge += E) {
      const to = (s.edges[edge + eTo] ?? 0) / N;
      const et = edgeTypes[s.edges[edge + eType] ?? 0] ?? "";
      if (et === "weak" || retainer[to] !== -1) continue;
      retainer[to] = n;
      const nameOrIndex = s.edges[edge + eName] ?? 0;
      retainerEdge[to] = et === "element" || et === "hidden" ? `[${nameOrIndex}]` : (s.strings[nameOrIndex] ?? "");
    }
  }
  const groups = new Map<string, [number, number]>();
  const sizes: Array<[number, number]> = [];
  let total = 0;
  for (let n = 0; n < count; n++) {
    const size = s.nodes[n * N + iSize] ?? 0;
    total += size;
    const key = nameOf(n);
    const g = groups.get(key) ?? [0, 0];
    g[0]++;
    g[1] += size;
    groups.set(key, g);
    sizes.push([n, size]);
  }
  sizes.sort((a, b) => b[1] - a[1]);
  const pathOf = (n: number): string => {
    const parts: string[] = [];
    for (let cur = n, i = 0; cur > 0 && i < 8; i++) {
      const r = retainer[cur] ?? -1;
      if (r < 0) break;
      parts.push(`${nameOf(r)}.${retainerEdge[cur] ?? ""}`);
      cur = r;
    }
    return parts.join(" ← ");
  };
  const largest = sizes.slice(0, top).map(([n, size]) => ({ what: nameOf(n), size, path: pathOf(n) }));
  return { total, groups, largest };
}

if (import.meta.main) {
  const { values, positionals } = parseArgs({ allowPositionals: true, options: { top: { type: "string", default: "25" }, diff: { type: "string" } } });
  const top = Number(values.top);
  const file = positionals[0];
  if (file === undefined) throw new Error("usage: heap-summary.ts FILE.heapsnapshot [--top N] [--diff OTHER]");
  const a = summarizeSnapshot(file, top);
  const b = values.diff === undefined ? undefined : summarizeSnapshot(values.diff, top);
  const kb = (x: number): string => `${(x / 1024).toFixed(0)} kB`.padStart(10);
  console.log(`total self size ${kb(a.total)}${b === undefined ? "" : ` (${kb(a.total - b.total)} over ${values.diff})`}`);
  const rows = [...a.groups].map(([k, [n, size]]) => [k, n - (b?.groups.get(k)?.[0] ?? 0), size - (b?.groups.get(k)?.[1] ?? 0)] as const);
  rows.sort((x, y) => y[2] - x[2]);
  for (const [k, n, size] of rows.slice(0, top)) console.log(`${kb(size)} ${String(n).padStart(7)}  ${k}`);
  console.log("\nlargest nodes:");
  for (const l of a.largest) console.log(`${kb(l.size)}  ${l.what}  ← ${l.path}`);
}
