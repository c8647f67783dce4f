/** Least squares for y = a + b·x; undefined with fewer than two distinct x. Pure. */
export function fitLine(pts: ReadonlyArray<readonly [number, number]>): { a: number; b: number } | undefined {
  if (pts.length < 2) return undefined;
  const mx = pts.reduce((s, p) => s + p[0], 0) / pts.length;
  const my = pts.reduce((s, p) => s + p[1], 0) / pts.length;
  const sxx = pts.reduce((s, p) => s + (p[0] - mx) ** 2, 0);
  if (sxx === 0) return undefined;
  const b = pts.reduce((s, p) => s + (p[0] - mx) * (p[1] - my), 0) / sxx;
  return { a: my - b * mx, b };
}
