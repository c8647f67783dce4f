/**
 * The demo's outputs, pure: the per-replica text table, byte formatting, and
 * `demo-report.html` with inline SVG line charts (objects and bytes per
 * replica over time, coverage over time). No dependency, no I/O: the caller
 * writes the string.
 *
 * A small inline script stamps each chart with its rendered size and each
 * line with its rendered length (`data-rendered`, `data-length`), so a
 * headless browser's DOM dump shows the charts were laid out and drawn, not
 * merely present in the file.
 */

export function fmtBytes(n: number): string {
  if (n >= 1 << 20) return `${(n / (1 << 20)).toFixed(1)} MiB`;
  if (n >= 1 << 10) return `${(n / (1 << 10)).toFixed(0)} KiB`;
  return `${n} B`;
}

export function fmtPct(x: number): string {
  // A saving that rounds to nothing is 0.0%, never "-0.0%".
  const tenths = Math.round(x * 1000) / 10;
  return `${(tenths === 0 ? 0 : tenths).toFixed(1)}%`;
}

/** A plain-text table: a header, a rule, and left-aligned columns. */
export function textTable(head: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (c: readonly string[]): string => c.map((x, i) => x.padEnd(widths[i] ?? 0)).join("  ").trimEnd();
  return [line(head), line(widths.map((w) => "-".repeat(w))), ...rows.map(line)].join("\n");
}

export interface Series {
  readonly name: string;
  /** [seconds since start, value]. */
  readonly points: readonly (readonly [number, number])[];
  readonly dashed?: boolean;
}

export interface Marker {
  readonly at: number;
  readonly label: string;
}

export interface ChartOptions {
  readonly id: string;
  readonly title: string;
  readonly yLabel: string;
  readonly series: readonly Series[];
  readonly markers: readonly Marker[];
  /** Formats a y tick. */
  readonly format: (v: number) => string;
  /** Fixed y maximum (e.g. 1 for a ratio); default: the data's, rounded up. */
  readonly yMax?: number;
  readonly yMin?: number;
}

const COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"];

export function escapeHtml(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

/** 1, 2 or 5 times a power of ten, at least `x`. */
function niceCeil(x: number): number {
  if (x <= 0) return 1;
  const p = 10 ** Math.floor(Math.log10(x));
  for (const m of [1, 2, 5, 10]) if (m * p >= x) return m * p;
  return 10 * p;
}

/** One SVG line chart. Empty series still draw axes. */
export function lineChart(o: ChartOptions): string {
  const W = 940;
  const H = 280;
  const L = 78;
  // Room for the legend at the right.
  const R = 220;
  const T = 34;
  const B = 36;
  const pw = W - L - R;
  const ph = H - T - B;
  const all = o.series.flatMap((s) => s.points);
  const tMax = Math.max(1, ...all.map((p) => p[0]), ...o.markers.map((m) => m.at));
  const yMin = o.yMin ?? 0;
  const yMax = o.yMax ?? niceCeil(Math.max(...all.map((p) => p[1]), 0) * 1.05);
  const x = (t: number): number => L + (t / tMax) * pw;
  const y = (v: number): number => T + ph - ((v - yMin) / (yMax - yMin || 1)) * ph;
  const parts: string[] = [];
  parts.push(`<svg class="chart" id="${escapeHtml(o.id)}" xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" role="img" aria-label="${escapeHtml(o.title)}">`);
  parts.push(`<text x="${L}" y="20" class="title">${escapeHtml(o.title)}</text>`);
  for (let i = 0; i <= 4; i++) {
    const v = yMin + ((yMax - yMin) * i) / 4;
    const yy = y(v).toFixed(1);
    parts.push(`<line x1="${L}" x2="${L + pw}" y1="${yy}" y2="${yy}" class="grid"/>`);
    parts.push(`<text x="${L - 6}" y="${yy}" class="tick" text-anchor="end" dominant-baseline="middle">${escapeHtml(o.format(v))}</text>`);
  }
  const step = niceCeil(tMax / 8);
  for (let t = 0; t <= tMax + 1e-9; t += step) parts.push(`<text x="${x(t).toFixed(1)}" y="${T + ph + 16}" class="tick" text-anchor="middle">${t.toFixed(0)} s</text>`);
  parts.push(`<line x1="${L}" x2="${L}" y1="${T}" y2="${T + ph}" class="axis"/><line x1="${L}" x2="${L + pw}" y1="${T + ph}" y2="${T + ph}" class="axis"/>`);
  parts.push(`<text x="14" y="${T + ph / 2}" class="tick" transform="rotate(-90 14 ${T + ph / 2})" text-anchor="middle">${escapeHtml(o.yLabel)}</text>`);
  o.markers.forEach((m, i) => {
    const xx = x(m.at).toFixed(1);
    parts.push(`<line x1="${xx}" x2="${xx}" y1="${T}" y2="${T + ph}" class="marker"/>`);
    parts.push(`<text x="${(x(m.at) + 3).toFixed(1)}" y="${T + 10 + (i % 2) * 11}" class="mlabel">${escapeHtml(m.label)}</text>`);
  });
  o.series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length] ?? "#000";
    const pts = s.points.map((p) => `${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(" ");
    if (pts !== "") parts.push(`<polyline class="series" data-series="${escapeHtml(s.name)}" fill="none" stroke="${color}" stroke-width="2"${s.dashed === true ? ' stroke-dasharray="6 4"' : ""} points="${pts}"/>`);
    const ly = T + 8 + i * 18;
    parts.push(`<line x1="${L + pw + 14}" x2="${L + pw + 38}" y1="${ly}" y2="${ly}" stroke="${color}" stroke-width="2"${s.dashed === true ? ' stroke-dasharray="6 4"' : ""}/>`);
    parts.push(`<text x="${L + pw + 44}" y="${ly}" class="legend" dominant-baseline="middle">${escapeHtml(s.name)}</text>`);
  });
  parts.push("</svg>");
  return parts.join("\n");
}

export interface ReportScene {
  readonly title: string;
  readonly ok: boolean;
  /** The per-replica table as text. */
  readonly table: string;
  readonly lines: readonly string[];
}

/** A claim the demo checked, and what it saw. */
export interface ReportInvariant {
  readonly claim: string;
  readonly held: boolean;
  readonly detail: string;
}

export interface ReportData {
  readonly title: string;
  readonly generatedAt: string;
  readonly summary: readonly string[];
  readonly ok: boolean;
  readonly charts: readonly ChartOptions[];
  readonly scenes: readonly ReportScene[];
  readonly invariants: readonly ReportInvariant[];
}

// Runs once the page is laid out: stamps sizes so a DOM dump proves rendering.
const STAMP = `document.querySelectorAll("svg.chart").forEach(function (svg) {
  var b = svg.getBBox();
  svg.setAttribute("data-rendered", Math.round(b.width) + "x" + Math.round(b.height));
  svg.querySelectorAll("polyline.series").forEach(function (p) { p.setAttribute("data-length", String(Math.round(p.getTotalLength()))); });
});`;

/**
 * A scene's lines as HTML: prose as paragraphs, and each run of lines
 * indented by two spaces (a command's output, such as the operator's audit
 * table) as one preformatted block, so its columns stay aligned.
 */
export function renderLines(lines: readonly string[]): string {
  const out: string[] = [];
  let block: string[] = [];
  const flush = (): void => {
    if (block.length > 0) out.push(`<pre>${escapeHtml(block.join("\n"))}</pre>`);
    block = [];
  };
  for (const l of lines) {
    if (l.startsWith("  ")) block.push(l.slice(2));
    else {
      flush();
      out.push(`<p>${escapeHtml(l)}</p>`);
    }
  }
  flush();
  return out.join("\n");
}

export function renderReport(d: ReportData): string {
  const scenes = d.scenes
    .map(
      (s) => `<section class="scene ${s.ok ? "ok" : "bad"}">
<h3>${escapeHtml(s.title)} <span class="verdict">${s.ok ? "invariants held" : "INVARIANT BROKEN"}</span></h3>
<pre>${escapeHtml(s.table)}</pre>
${renderLines(s.lines)}
</section>`,
    )
    .join("\n");
  const inv = d.invariants.map((i) => `<tr class="${i.held ? "ok" : "bad"}"><td>${i.held ? "held" : "BROKEN"}</td><td>${escapeHtml(i.claim)}</td><td>${escapeHtml(i.detail)}</td></tr>`).join("\n");
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>${escapeHtml(d.title)}</title>
<style>
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px auto; max-width: 1000px; color: #222; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 28px; } h3 { font-size: 15px; }
.verdict { font-weight: normal; font-size: 13px; margin-left: 8px; }
.ok .verdict, tr.ok td:first-child { color: #2a7a2a; } .bad .verdict, tr.bad td:first-child { color: #b00020; font-weight: bold; }
pre { background: #f6f6f6; padding: 8px; overflow-x: auto; font-size: 12px; }
table { border-collapse: collapse; } td { border-top: 1px solid #ddd; padding: 3px 8px; vertical-align: top; }
svg .title { font-size: 14px; font-weight: 600; } svg .tick, svg .legend { font-size: 11px; fill: #444; }
svg .grid { stroke: #e5e5e5; } svg .axis { stroke: #888; } svg .marker { stroke: #999; stroke-dasharray: 3 3; } svg .mlabel { font-size: 10px; fill: #666; }
.banner { padding: 8px 12px; border-radius: 4px; } .banner.ok { background: #e8f5e9; } .banner.bad { background: #fdecea; }
</style>
</head>
<body>
<h1>${escapeHtml(d.title)}</h1>
<p class="banner ${d.ok ? "ok" : "bad"}">${d.ok ? "Every invariant held." : "Some invariant did NOT hold."} Generated ${escapeHtml(d.generatedAt)}.</p>
${d.summary.map((l) => `<p>${escapeHtml(l)}</p>`).join("\n")}
<h2>Over time</h2>
${d.charts.map(lineChart).join("\n")}
<h2>Scenes</h2>
${scenes}
<h2>Invariants</h2>
<table>${inv}</table>
<script>${STAMP}</script>
</body>
</html>
`;
}
