/**
 * Hand-written SVG charts for docs/performance.md: a line chart over a
 * categorical x axis and a grouped bar chart, both with a legend, axis
 * labels, optional dashed reference series, and a white background so that
 * they read the same in GitHub's light and dark themes. No dependencies;
 * pure functions from data to markup.
 */

export interface Series {
  readonly name: string;
  /** One value per x category; `undefined` leaves a gap. */
  readonly values: ReadonlyArray<number | undefined>;
  readonly color: string;
  /** Drawn dashed, without markers: a target or ideal, not a measurement. */
  readonly reference?: boolean;
  /** Line width (line charts); default 2.5. A wider line drawn first stays visible under an equal one. */
  readonly width?: number;
}

export interface ChartOptions {
  readonly title: string;
  readonly categories: readonly string[];
  readonly series: readonly Series[];
  readonly xLabel: string;
  readonly yLabel: string;
  readonly width?: number;
  readonly height?: number;
  /** Horizontal reference lines (e.g. a target). */
  readonly hLines?: ReadonlyArray<{ readonly value: number; readonly label: string; readonly color?: string }>;
  /** Clip the y axis here (bar charts): taller bars end at the top with their true value printed. */
  readonly yMax?: number;
}

export const PALETTE = { blue: "#1f77b4", orange: "#ff7f0e", green: "#2ca02c", red: "#d62728", purple: "#9467bd", grey: "#7f7f7f", brown: "#8c564b" } as const;

const FONT = 'font-family="Helvetica, Arial, sans-serif"';

function esc(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

/** 0, then steps of 1, 2 or 5 × 10^k covering `max` in about five ticks. */
export function niceTicks(max: number): number[] {
  if (!(max > 0)) return [0, 1];
  const raw = max / 5;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = ([1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? 10 * mag);
  const out: number[] = [];
  for (let v = 0; v <= max + step * 0.999; v += step) out.push(Number(v.toPrecision(12)));
  return out;
}

function fmt(v: number): string {
  if (v === 0) return "0";
  if (Math.abs(v) >= 1000) return `${Math.round(v / 100) / 10}k`.replace(".0k", "k");
  if (Math.abs(v) >= 10) return String(Math.round(v));
  return String(Number(v.toPrecision(2)));
}

interface Frame {
  readonly w: number;
  readonly h: number;
  readonly left: number;
  readonly right: number;
  readonly top: number;
  readonly bottom: number;
  readonly ticks: number[];
  readonly y: (v: number) => number;
  readonly parts: string[];
}

function frame(o: ChartOptions, legendRows: number): Frame {
  const w = o.width ?? 640;
  const h = o.height ?? 360;
  const left = 64;
  const right = w - 16;
  const top = 40 + legendRows * 18;
  const bottom = h - 48;
  const all = [...o.series.flatMap((s) => s.values.filter((v): v is number => v !== undefined && Number.isFinite(v))), ...(o.hLines ?? []).map((l) => l.value)];
  const top0 = Math.max(0, ...all) * 1.05;
  const ticks = niceTicks(o.yMax !== undefined ? Math.min(o.yMax, top0) : top0);
  const top$ = ticks[ticks.length - 1] ?? 1;
  const y = (v: number): number => bottom - (v / top$) * (bottom - top);
  const parts: string[] = [];
  parts.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${w}" height="${h}" viewBox="0 0 ${w} ${h}" ${FONT} font-size="12">`);
  parts.push(`<rect width="${w}" height="${h}" fill="#ffffff"/>`);
  parts.push(`<text x="${w / 2}" y="20" text-anchor="middle" font-size="14" font-weight="bold" fill="#222">${esc(o.title)}</text>`);
  for (const t of ticks) {
    const yy = y(t).toFixed(1);
    parts.push(`<line x1="${left}" x2="${right}" y1="${yy}" y2="${yy}" stroke="#e5e5e5"/>`);
    parts.push(`<text x="${left - 6}" y="${yy}" dy="4" text-anchor="end" fill="#444">${fmt(t)}</text>`);
  }
  parts.push(`<line x1="${left}" x2="${left}" y1="${top}" y2="${bottom}" stroke="#888"/>`);
  parts.push(`<line x1="${left}" x2="${right}" y1="${bottom}" y2="${bottom}" stroke="#888"/>`);
  parts.push(`<text x="${(left + right) / 2}" y="${h - 10}" text-anchor="middle" fill="#222">${esc(o.xLabel)}</text>`);
  parts.push(`<text transform="translate(16 ${(top + bottom) / 2}) rotate(-90)" text-anchor="middle" fill="#222">${esc(o.yLabel)}</text>`);
  return { w, h, left, right, top, bottom, ticks, y, parts };
}

function legend(f: Frame, o: ChartOptions): void {
  // Legend rows under the title, left to right, wrapping.
  let x = f.left;
  let row = 0;
  for (const s of o.series) {
    const width = 34 + s.name.length * 6.6;
    if (x + width > f.right) {
      x = f.left;
      row++;
    }
    const yy = 38 + row * 18;
    const dash = s.reference === true ? ' stroke-dasharray="5 4"' : "";
    f.parts.push(`<line x1="${x}" x2="${x + 22}" y1="${yy - 4}" y2="${yy - 4}" stroke="${s.color}" stroke-width="3"${dash}/>`);
    f.parts.push(`<text x="${x + 27}" y="${yy}" fill="#222">${esc(s.name)}</text>`);
    x += width;
  }
}

function legendRows(o: ChartOptions, w: number): number {
  let x = 64;
  let rows = 1;
  for (const s of o.series) {
    const width = 34 + s.name.length * 6.6;
    if (x + width > w - 16) {
      x = 64;
      rows++;
    }
    x += width;
  }
  return rows;
}

function hLines(f: Frame, o: ChartOptions): void {
  for (const l of o.hLines ?? []) {
    const yy = f.y(l.value).toFixed(1);
    const c = l.color ?? PALETTE.red;
    f.parts.push(`<line x1="${f.left}" x2="${f.right}" y1="${yy}" y2="${yy}" stroke="${c}" stroke-dasharray="6 4" stroke-width="1.5"/>`);
    f.parts.push(`<text x="${f.left + 6}" y="${yy}" dy="-4" text-anchor="start" fill="${c}" stroke="#ffffff" stroke-width="3" paint-order="stroke">${esc(l.label)}</text>`);
  }
}

/** Lines over categorical x positions (e.g. N = 1, 2, 4, 8), markers on measured points. */
export function lineChart(o: ChartOptions): string {
  const f = frame(o, legendRows(o, o.width ?? 640));
  const n = o.categories.length;
  const x = (i: number): number => f.left + 30 + (n <= 1 ? 0 : (i * (f.right - f.left - 60)) / (n - 1));
  o.categories.forEach((c, i) => {
    f.parts.push(`<text x="${x(i).toFixed(1)}" y="${f.bottom + 18}" text-anchor="middle" fill="#444">${esc(c)}</text>`);
  });
  hLines(f, o);
  for (const s of o.series) {
    let d = "";
    let pen = false;
    s.values.forEach((v, i) => {
      if (v === undefined || !Number.isFinite(v)) {
        pen = false;
        return;
      }
      d += `${pen ? "L" : "M"}${x(i).toFixed(1)} ${f.y(v).toFixed(1)} `;
      pen = true;
    });
    const dash = s.reference === true ? ' stroke-dasharray="5 4"' : "";
    f.parts.push(`<path d="${d.trim()}" fill="none" stroke="${s.color}" stroke-width="${s.width ?? 2.5}"${dash}/>`);
    if (s.reference !== true) {
      s.values.forEach((v, i) => {
        if (v === undefined || !Number.isFinite(v)) return;
        f.parts.push(`<circle cx="${x(i).toFixed(1)}" cy="${f.y(v).toFixed(1)}" r="3.5" fill="${s.color}"><title>${esc(`${s.name}, ${o.categories[i] ?? ""}: ${fmt(v)}`)}</title></circle>`);
      });
    }
  }
  legend(f, o);
  f.parts.push("</svg>");
  return f.parts.join("\n") + "\n";
}

/** Grouped bars: one group per category, one bar per series, value labels on top. */
export function barChart(o: ChartOptions): string {
  const f = frame(o, legendRows(o, o.width ?? 640));
  const n = o.categories.length;
  const groupW = (f.right - f.left) / Math.max(1, n);
  const bars = o.series.filter((s) => s.reference !== true);
  const barW = Math.min(48, (groupW * 0.75) / Math.max(1, bars.length));
  o.categories.forEach((c, i) => {
    const cx = f.left + groupW * (i + 0.5);
    f.parts.push(`<text x="${cx.toFixed(1)}" y="${f.bottom + 18}" text-anchor="middle" fill="#444">${esc(c)}</text>`);
    bars.forEach((s, k) => {
      const v = s.values[i];
      if (v === undefined || !Number.isFinite(v)) return;
      const x0 = cx - (bars.length * barW) / 2 + k * barW;
      const top = f.ticks[f.ticks.length - 1] ?? v;
      const clipped = v > top;
      const y0 = f.y(clipped ? top : v);
      f.parts.push(`<rect x="${x0.toFixed(1)}" y="${y0.toFixed(1)}" width="${(barW - 2).toFixed(1)}" height="${(f.bottom - y0).toFixed(1)}" fill="${s.color}"${clipped ? ' fill-opacity="0.6"' : ""}><title>${esc(`${s.name}, ${c}: ${fmt(v)}`)}</title></rect>`);
      f.parts.push(`<text x="${(x0 + barW / 2 - 1).toFixed(1)}" y="${(y0 - 4).toFixed(1)}" text-anchor="middle" font-size="10" fill="#333">${clipped ? "▲" : ""}${fmt(v)}</text>`);
    });
  });
  hLines(f, o);
  legend(f, o);
  f.parts.push("</svg>");
  return f.parts.join("\n") + "\n";
}
