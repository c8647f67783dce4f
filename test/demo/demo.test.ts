/**
 * The demo as CI runs it (`shardcar demo --quick`): ring mode, six scenes
 * (the last two in labels mode with the gate off, as on a managed cluster,
 * and a scale-out while an unmodified controller creates children), exit 0
 * only if every invariant held; and its HTML report, opened in
 * headless Chromium, really draws its charts: the DOM Chromium produced must
 * contain the SVG charts with their lines laid out (the report's inline
 * script stamps each chart's rendered box and each line's rendered length),
 * and the screenshot must be a real image.
 */
import t from "tap";
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { cli } from "../ops/support.ts";

const CHROMIUM = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].find((p) => existsSync(p));

function chromium(args: string[]): Promise<{ stdout: string; code: number }> {
  const profile = mkdtempSync(join(tmpdir(), "shardcar-chromium-"));
  const base = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage", `--user-data-dir=${profile}`];
  return new Promise((resolve) => {
    execFile(CHROMIUM ?? "chromium", [...base, ...args], { timeout: 90_000, maxBuffer: 64 * 1024 * 1024 }, (err, stdout) => {
      resolve({ stdout, code: err === null ? 0 : typeof err.code === "number" ? err.code : 1 });
    });
  });
}

const dir = mkdtempSync(join(tmpdir(), "shardcar-demo-"));
const report = join(dir, "demo-report.html");

t.test("shardcar demo --quick runs every scene in ring mode, holds every invariant and exits 0", async (t) => {
  const started = Date.now();
  const r = await cli(["demo", "--quick", "--report", report]);
  const secs = (Date.now() - started) / 1000;
  // What broke, if anything: every line the demo marks so, with its scene.
  const broken = r.out.split("\n").filter((l) => l.startsWith("== ") || /BROKEN/.test(l));
  t.equal(r.code, 0, `exit code (stderr: ${r.err.slice(0, 500)}; ${broken.filter((l) => /BROKEN/.test(l)).length === 0 ? "no BROKEN line" : broken.join("\n")})`);
  // How long it took is printed, not judged: a wall-clock bound on a shared
  // machine fails under load whatever the build (tap's timeout guards a hang).
  t.comment(`finished in ${secs.toFixed(1)} s`);
  const scenes = r.out.split(/^== /m).slice(1);
  t.equal(scenes.length, 6, "six scenes");
  const [start, scale, kill, off, labels, families] = scenes;
  for (const s of scenes) t.match(s, /^coverage holds: every one of \d+ pods is cached by exactly one replica/m, `${s.split("\n")[0] ?? ""}: coverage in plain words`);
  for (const s of scenes) t.match(s, /^bytes this scene: controllers received .*, unsharded they would have received .* \(saved/m, "bytes saved against the unsharded twins");
  t.equal(rowsOf(start).length, 3, "scene 1: three replicas");
  t.equal(rowsOf(scale).length, 4, "scene 2: four replicas");
  t.equal(rowsOf(kill).length, 3, "scene 3: three replicas");
  t.notOk(rowsOf(kill).some((row) => row.startsWith("replica-1 ")), "the killed replica is gone");
  t.ok(rowsOf(start).every((row) => row.endsWith("server (shardInfo)")), "gate on: the server filtered");
  t.ok(rowsOf(off).every((row) => row.endsWith("proxy (fallback)")), "gate off: every proxy fell back to filtering");
  t.match(off, /the apiserver sent ([\d.]+ \w+) instead of \1 \(saved 0\.0%\)/, "gate off: the apiserver sent every proxy every byte");
  // Labels mode, the gate still off: the apiserver filters by the slot label.
  t.match(labels ?? "", /^scene 5: labels mode, the gate still off/, "scene 5 is labels mode");
  t.match(labels, /labelled (\d+) of \1 pods with shard\.shardcar\.io\/controller=<slot> .*Labelled=True/, "the manager labelled every pod before the rollout");
  t.equal(rowsOf(labels).length, 3, "scene 5: three replicas");
  t.ok(rowsOf(labels).every((row) => row.endsWith("server (slot label)")), "labels mode: the server filtered every replica's lists");
  const shares = [...(labels ?? "").matchAll(/replica-\d+ [\d.]+ \w+ of [\d.]+ \w+ \(([\d.]+)%; its keyspace ([\d.]+)%\)/g)].map((m) => [Number(m[1]), Number(m[2])]);
  t.equal(shares.length, 3, "each proxy's bytes from the apiserver are set against its unsharded twin's");
  t.ok(shares.every(([got = 100, share = 0]) => got <= share * 1.25 + 2), `gate off, labels mode: each proxy got about its keyspace share of the apiserver's bytes (${JSON.stringify(shares)})`);
  t.match(labels, /the apiserver sent [\d.]+ \w+ instead of [\d.]+ \w+ \(saved [5-9]\d\.\d%\)/, "labels mode saves the apiserver's egress with the gate off");
  // A scale-out while Deployments are created: one ReplicaSet each, co-located.
  t.equal(rowsOf(families).length, 4, "scene 6: four replicas");
  t.match(families, /(\d+) Deployments, each with exactly one ReplicaSet \(created by replica-\d+ \d+/, "no parent got a second child");
  t.match(families, /parents and children share a shard in every replica's cache/);
  t.match(families, /^exclusive handoff: /m, "the exclusive handoff's gap is reported");
  t.match(scale, /no pod was uncached at any \d+ ms sample during the handoff/, "scaling out left no gap");
  t.match(kill, /the gap lasted about [\d.]+ s/, "the kill's gap is measured");
  t.match(families, /OK: the sum equals the total; nothing missing, nothing duplicated\./, "the operator's audit agrees");
  t.match(families, /canaries: OK, every range's owner delivered its canary/);
  t.match(r.out, /^every invariant held: (\d+) of \1 across 6 scenes/m);
  t.match(r.out, `report: ${report}`);
  t.ok(existsSync(report), "the report exists");
});

function rowsOf(scene: string | undefined): string[] {
  return (scene ?? "").split("\n").filter((l) => /^replica-\d+ {2}/.test(l)).map((l) => l.trimEnd());
}

t.test("the report's charts render in headless Chromium", { skip: CHROMIUM === undefined && process.env["SHARDCAR_REQUIRE_CHROMIUM"] !== "1" ? "chromium is not installed (apt-get install -y chromium); .ci/run installs it and sets SHARDCAR_REQUIRE_CHROMIUM=1" : false }, async (t) => {
  t.ok(CHROMIUM !== undefined, "chromium is installed");
  t.ok(existsSync(report), "the demo wrote its report");
  const html = readFileSync(report, "utf8");
  t.match(html, /<svg class="chart"/, "the file itself has SVG charts (Chromium must still draw them)");
  const dom = await chromium(["--dump-dom", pathToFileURL(report).href]);
  t.equal(dom.code, 0, "chromium --dump-dom exits 0");
  const charts = [...dom.stdout.matchAll(/<svg class="chart" id="([a-z]+)"[^>]*data-rendered="(\d+)x(\d+)"[^>]*>([\s\S]*?)<\/svg>/g)];
  t.same(charts.map((c) => c[1]).sort(), ["bytes", "coverage", "objects", "upstream"], "four charts, each laid out by Chromium (data-rendered is set by the page's script at render time)");
  for (const c of charts) {
    const [, id, w, h, body] = c;
    t.ok(Number(w) > 400 && Number(h) > 150, `${id ?? "?"}: rendered box ${w ?? "?"}x${h ?? "?"}`);
    const lines = [...(body ?? "").matchAll(/<polyline class="series" data-series="([^"]+)"[^>]*points="([^"]+)"[^>]*data-length="(\d+)"/g)];
    t.ok(lines.length >= 2, `${id ?? "?"}: ${lines.length} lines drawn`);
    for (const [, series, points, length] of lines) {
      t.ok((points ?? "").split(" ").length > 10, `${id ?? "?"}/${series ?? "?"}: more than 10 samples`);
      // A line is at least as long as the stretch of time it spans: Chromium
      // measured it (getTotalLength), so it was laid out. A replica that runs
      // for one scene spans little of the chart, so no fixed length fits all.
      const xs = (points ?? "").split(" ").map((p) => Number(p.split(",")[0]));
      const span = Math.max(...xs) - Math.min(...xs);
      t.ok(span > 0 && Number(length) >= span * 0.99, `${id ?? "?"}/${series ?? "?"}: drawn ${length ?? "?"} px long, spanning ${span.toFixed(0)} px`);
    }
  }
  const shot = join(dir, "demo-report.png");
  const s = await chromium(["--window-size=1100,2400", `--screenshot=${shot}`, pathToFileURL(report).href]);
  t.equal(s.code, 0, "chromium --screenshot exits 0");
  t.ok(existsSync(shot), `screenshot saved: ${shot}`);
  const png = readFileSync(shot);
  t.same([...png.subarray(1, 4)].map((b) => String.fromCharCode(b)).join(""), "PNG", "it is a PNG");
  t.ok(statSync(shot).size > 50_000, `a real picture, not a blank page (${statSync(shot).size} bytes)`);
});

t.test("demo flags: --help has examples; bad values exit 2 naming the flag", async (t) => {
  const h = await cli(["demo", "--help"]);
  t.equal(h.code, 0);
  t.match(h.out, /Examples:\n {2}shardcar demo\n/);
  for (const [argv, re] of [
    [["demo", "--pods", "many"], /--pods "many"/],
    [["demo", "--replicas", "1"], /--replicas "1"/],
    [["demo", "--speed", "fast"], /--speed/],
  ] as Array<[string[], RegExp]>) {
    const r = await cli(argv);
    t.equal(r.code, 2, argv.join(" "));
    t.match(r.err, re);
  }
});
