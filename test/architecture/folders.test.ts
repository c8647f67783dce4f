/**
 * The layout is the architecture: a folder of src/ (or of bench/) may
 * import only the folders written down below it here, and no folder (nor
 * file) imports one that imports it back, directly or through others. A new
 * import between folders therefore needs a line in MAY_IMPORT (or
 * BENCH_MAY_IMPORT), and that list must itself stay acyclic, so it cannot
 * be widened into a cycle either. bench/ may import src/; src/ never
 * imports bench/.
 *
 * Imports are read with TypeScript's own pre-processor (comments and
 * strings are not mistaken for imports; `import type`, `export … from` and
 * `import()` all count: a type is a dependency of the layout too). In
 * bench/, a module a bench forks by its path (`new URL("../children/x.ts",
 * import.meta.url)`) counts as well: the bench needs it as much as an import.
 */
import t from "tap";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const SRC = join(ROOT, "src");
const BENCH = join(ROOT, "bench");

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

/**
 * What each top-level folder (or file) of bench/ may import, and what it
 * may import outside bench/: `src`, the code measured, and `test/support`,
 * the test suite's fixtures (synthetic pods, protobuf helpers, the client-go
 * controller). lib/ is the library (measurement, judges, report);
 * children/ the processes a bench or tool forks; tools/ what a person runs
 * by hand. The runner starts run-one.ts, and run-one.ts a bench, by path,
 * not by import.
 */
const BENCH_MAY_IMPORT: Readonly<Record<string, readonly string[]>> = {
  "run.ts": ["lib"],
  "run-one.ts": ["lib"],
  macro: ["lib", "children", "src", "test/support"],
  micro: ["lib", "src", "test/support"],
  tools: ["lib", "children", "src"],
  // A forked process runs the code measured and nothing of the bench's own.
  children: ["src"],
  // A rig shared by benches (ring-rig.ts) forks the children it drives.
  lib: ["src", "children"],
  src: [],
  "test/support": [],
};

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(p);
    return e.name.endsWith(".ts") ? [p] : [];
  });
}

/** A module forked by its path: `new URL("../children/x.ts", import.meta.url)`. */
const FORKED = /new URL\(\s*["'](\.{1,2}\/[^"']+\.ts)["']\s*,\s*import\.meta\.url\s*\)/g;

/**
 * Every relative import of every file under `dir`, as paths relative to
 * `dir` (`../src/…` for one outside it); with `forked`, the modules its
 * files fork by path too.
 */
function fileImports(dir: string, forked = false): Map<string, Set<string>> {
  const graph = new Map<string, Set<string>>();
  for (const file of sourceFiles(dir)) {
    const text = readFileSync(file, "utf8");
    const info = ts.preProcessFile(text, true, true);
    const targets = info.importedFiles.map((f) => f.fileName).filter((n) => n.startsWith("."));
    if (forked) targets.push(...[...text.matchAll(FORKED)].map((m) => m[1] ?? ""));
    graph.set(relative(dir, file), new Set(targets.map((n) => relative(dir, resolve(dirname(file), n)))));
  }
  return graph;
}

/** `shard/range.ts` → `shard`; `log.ts` → `log.ts`. */
function unitOf(path: string): string {
  return path.split(sep)[0] ?? path;
}

/** As {@link unitOf} inside bench/; outside it, `src`, `test/support`, or the top-level folder of the repository it is in. */
function benchUnitOf(path: string): string {
  if (!path.startsWith(`..${sep}`)) return unitOf(path);
  const [top, next] = relative(ROOT, resolve(BENCH, path)).split(sep);
  return top === "test" && next === "support" ? "test/support" : (top ?? path);
}

type Edges = Map<string, Map<string, string[]>>;

/** Imports between units, each with the file imports that make it. */
function unitEdges(files: Map<string, Set<string>>, unit: (path: string) => string = unitOf): Edges {
  const edges: Edges = new Map();
  for (const [from, targets] of files) {
    for (const to of targets) {
      const [a, b] = [unit(from), unit(to)];
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

const files = fileImports(SRC);
const edges = unitEdges(files);
const benchFiles = fileImports(BENCH, true);
const benchEdges = unitEdges(benchFiles, benchUnitOf);

/**
 * The layering tests of one tree: `files` its file imports, `edges` the
 * imports between its units, `unit` the unit of a path, `allowed` the
 * directions written down (named `listName`).
 */
function layering(tree: string, files: Map<string, Set<string>>, edges: Edges, unit: (path: string) => string, allowed: Readonly<Record<string, readonly string[]>>, listName: string): void {
  t.test(`no folder of ${tree}/ imports one that imports it back, directly or through others`, async (t) => {
    const graph = new Map([...edges].map(([a, to]) => [a, to.keys()]));
    // Each cycle is shown with the file imports that tie it, to say what to move.
    const found = cycles(graph).map((cycle) => ({ cycle, ties: cycle.flatMap((a) => cycle.flatMap((b) => edges.get(a)?.get(b) ?? [])) }));
    t.same(found, []);
  });

  t.test(`no file of ${tree}/ imports one that imports it back`, async (t) => {
    t.same(cycles(files), []);
  });

  t.test(`every import of ${tree}/ between folders (or out of it) goes in a direction written down in ${listName}`, async (t) => {
    for (const u of new Set([...files.keys()].map(unit))) {
      t.ok(u in allowed, `${tree}/${u} has a place in ${listName}`);
    }
    for (const [from, byTarget] of edges) {
      for (const [to, ties] of byTarget) {
        t.ok(allowed[from]?.includes(to), `${from} may import ${to}`, { ties });
      }
    }
  });

  t.test(`the allowed directions of ${tree}/ themselves form no cycle, so they name a layering`, async (t) => {
    t.same(cycles(new Map(Object.entries(allowed))), []);
  });
}

layering("src", files, edges, unitOf, MAY_IMPORT, "MAY_IMPORT");
layering("bench", benchFiles, benchEdges, benchUnitOf, BENCH_MAY_IMPORT, "BENCH_MAY_IMPORT");

t.test("the cycle finder can fail: it finds a direct and a transitive cycle, and nothing in a chain", async (t) => {
  t.same(cycles(new Map([["a", ["b"]], ["b", ["a"]]])), [["a", "b"]]);
  t.same(cycles(new Map([["a", ["b"]], ["b", ["c"]], ["c", ["a"]], ["d", ["a"]]])), [["a", "b", "c"]]);
  t.same(cycles(new Map([["a", ["b"]], ["b", ["c"]], ["c", []]])), []);
  t.ok(edges.get("proxy")?.has("shard"), "the reader sees the proxy's imports of the core (it reads imports at all)");
});

t.test("src/ never imports bench/, nor does test/support/, which bench/ imports", async (t) => {
  for (const dir of [SRC, join(ROOT, "test", "support")]) {
    const into = [...fileImports(dir)].flatMap(([from, targets]) => [...targets].filter((to) => resolve(dir, to).startsWith(BENCH + sep)).map((to) => `${from} -> ${to}`));
    t.same(into, [], relative(ROOT, dir));
  }
});

t.test("the bench reader sees imports, imports out of bench/ and modules forked by path", async (t) => {
  t.ok(benchEdges.get("macro")?.has("lib"), "a bench's import of the library");
  t.ok(benchEdges.get("micro")?.has("src"), "a micro bench's import of the code it measures");
  t.ok(benchEdges.get("micro")?.has("test/support"), "a micro bench's import of the test fixtures");
  t.ok(
    benchEdges.get("tools")?.get("children")?.includes(`tools${sep}proxy-cost.ts -> children${sep}bare-forwarder.ts`),
    "a tool's fork of a child by path, which no import names",
  );
});
