/**
 * The layout is the architecture: a folder of src/ may import only the
 * folders written down below it here, and no folder (nor file) imports one
 * that imports it back, directly or through others. A new import between
 * folders therefore needs a line in MAY_IMPORT, and that list must itself
 * stay acyclic, so it cannot be widened into a cycle either.
 *
 * Imports are read with TypeScript's own pre-processor (comments and
 * strings are not mistaken for imports; `import type`, `export … from` and
 * `import()` all count: a type is a dependency of the layout too).
 */
import t from "tap";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

const SRC = resolve(dirname(fileURLToPath(import.meta.url)), "../../src");

/**
 * What each top-level folder (or top-level file) of src/ may import, from
 * the top down. `shard/` is the pure core; the small top-level modules are
 * leaves every layer may use.
 */
const LEAVES = ["errors.ts", "is-record.ts", "log.ts", "clock.ts", "node-builtins.ts", "prom.ts", "sidecar-runtime.ts", "flag-table.ts", "map-entry.ts"];
const MAY_IMPORT: Readonly<Record<string, readonly string[]>> = {
  cli: ["demo", "devapi", "ops", "webhook", "proxy", "ring", "kube", "settings", "pki", "shard", ...LEAVES],
  demo: ["devapi", "ops", "webhook", "proxy", "ring", "kube", "settings", "pki", "shard", ...LEAVES],
  // preflight runs the webhook's server to test it; checks read its certificates.
  ops: ["webhook", "ring", "kube", "settings", "pki", "shard", ...LEAVES],
  // The webhook and the proxy share the pod settings (settings/), not each
  // other: proxy/ must never import webhook/, nor webhook/ proxy/.
  webhook: ["ring", "kube", "settings", "pki", "shard", ...LEAVES],
  proxy: ["kube", "settings", "pki", "shard", ...LEAVES],
  ring: ["kube", "settings", "shard", ...LEAVES],
  devapi: ["kube", "shard", ...LEAVES],
  kube: ["shard", ...LEAVES],
  // The pod settings: spelled in annotations, sidecar args and flags; pure.
  settings: ["shard", ...LEAVES],
  pki: [...LEAVES],
  shard: ["errors.ts"],
  "errors.ts": [],
  "is-record.ts": [],
  "log.ts": [],
  "clock.ts": [],
  "node-builtins.ts": [],
  "prom.ts": [],
  "sidecar-runtime.ts": [],
  "flag-table.ts": [],
  "map-entry.ts": [],
};

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(p);
    return e.name.endsWith(".ts") ? [p] : [];
  });
}

/** Every relative import of every file, as paths relative to src/. */
function fileImports(): Map<string, Set<string>> {
  const graph = new Map<string, Set<string>>();
  for (const file of sourceFiles(SRC)) {
    const info = ts.preProcessFile(readFileSync(file, "utf8"), true, true);
    const targets = info.importedFiles.map((f) => f.fileName).filter((n) => n.startsWith("."));
    graph.set(relative(SRC, file), new Set(targets.map((n) => relative(SRC, resolve(dirname(file), n)))));
  }
  return graph;
}

/** `shard/range.ts` → `shard`; `log.ts` → `log.ts`. */
function unitOf(path: string): string {
  return path.split(sep)[0] ?? path;
}

type Edges = Map<string, Map<string, string[]>>;

/** Imports between units, each with the file imports that make it. */
function unitEdges(files: Map<string, Set<string>>): Edges {
  const edges: Edges = new Map();
  for (const [from, targets] of files) {
    for (const to of targets) {
      const [a, b] = [unitOf(from), unitOf(to)];
      if (a === b) continue;
      const byTarget = edges.get(a) ?? new Map<string, string[]>();
      edges.set(a, byTarget);
      byTarget.set(b, [...(byTarget.get(b) ?? []), `${from} -> ${to}`]);
    }
  }
  return edges;
}

/** The cycles of a graph: its strongly connected components with more than one node (Tarjan). */
function cycles(graph: ReadonlyMap<string, Iterable<string>>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, index.size);
    low.set(v, index.get(v) ?? 0);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v) ?? 0, low.get(w) ?? 0));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v) ?? 0, index.get(w) ?? 0));
      }
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    for (let w = stack.pop(); w !== undefined; w = stack.pop()) {
      onStack.delete(w);
      component.push(w);
      if (w === v) break;
    }
    if (component.length > 1) found.push(component.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found;
}

const files = fileImports();
const edges = unitEdges(files);

t.test("no folder of src/ imports one that imports it back, directly or through others", async (t) => {
  const graph = new Map([...edges].map(([a, to]) => [a, to.keys()]));
  // Each cycle is shown with the file imports that tie it, to say what to move.
  const found = cycles(graph).map((cycle) => ({ cycle, ties: cycle.flatMap((a) => cycle.flatMap((b) => edges.get(a)?.get(b) ?? [])) }));
  t.same(found, []);
});

t.test("no file of src/ imports one that imports it back", async (t) => {
  t.same(cycles(files), []);
});

t.test("every import between folders goes in a direction written down in MAY_IMPORT", async (t) => {
  for (const unit of new Set([...files.keys()].map(unitOf))) {
    t.ok(unit in MAY_IMPORT, `src/${unit} has a place in MAY_IMPORT`);
  }
  for (const [from, byTarget] of edges) {
    for (const [to, ties] of byTarget) {
      t.ok(MAY_IMPORT[from]?.includes(to), `${from} may import ${to}`, { ties });
    }
  }
});

t.test("the allowed directions themselves form no cycle, so they name a layering", async (t) => {
  t.same(cycles(new Map(Object.entries(MAY_IMPORT))), []);
});

t.test("the cycle finder can fail: it finds a direct and a transitive cycle, and nothing in a chain", async (t) => {
  t.same(cycles(new Map([["a", ["b"]], ["b", ["a"]]])), [["a", "b"]]);
  t.same(cycles(new Map([["a", ["b"]], ["b", ["c"]], ["c", ["a"]], ["d", ["a"]]])), [["a", "b", "c"]]);
  t.same(cycles(new Map([["a", ["b"]], ["b", ["c"]], ["c", []]])), []);
  t.ok(edges.get("proxy")?.has("shard"), "the reader sees the proxy's imports of the core (it reads imports at all)");
});
