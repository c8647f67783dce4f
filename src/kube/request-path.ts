/**
 * A request path as the apiserver reads it. Go's net/http refuses a request
 * whose path holds a malformed percent-escape (400 `invalid URL escape`), and
 * the apiserver routes on the decoded path (`req.URL.Path`): the whole path
 * is decoded first and split on `/` afterwards, so `%2F` separates segments
 * and `%70ods` is `pods`. Whoever decides what a request means (the proxy's
 * classifier, devapi's router) must read it the same way, or a request the
 * server serves as a sharded list could be taken for something else.
 * Pure; never throws.
 */

const HEX = /^[0-9a-fA-F]{2}$/;

/** The first malformed percent-escape in `path` (e.g. `"%zz"`, `"%4"`), or undefined. */
export function malformedEscape(path: string): string | undefined {
  for (let i = path.indexOf("%"); i !== -1; i = path.indexOf("%", i + 1)) {
    const hex = path.slice(i + 1, i + 3);
    if (!HEX.test(hex)) return path.slice(i, i + 3);
  }
  return undefined;
}

/**
 * Decodes every `%XX` as Go's `url.PathUnescape` does: into bytes, not
 * necessarily UTF-8 (invalid sequences become U+FFFD, which no resource,
 * namespace or object name contains). Undefined when an escape is malformed.
 */
export function decodeRequestPath(path: string): string | undefined {
  if (!path.includes("%")) return path;
  if (malformedEscape(path) !== undefined) return undefined;
  const bytes: number[] = [];
  const text = Buffer.from(path, "utf8");
  for (let i = 0; i < text.length; i++) {
    const b = text[i] as number;
    if (b === 0x25) {
      bytes.push(Number.parseInt(String.fromCharCode(text[i + 1] as number, text[i + 2] as number), 16));
      i += 2;
    } else {
      bytes.push(b);
    }
  }
  return Buffer.from(bytes).toString("utf8");
}

/** The segments the server routes on: the decoded path split on `/`, empty segments dropped. */
export function pathSegments(path: string): string[] | undefined {
  return decodeRequestPath(path)
    ?.split("/")
    .filter((s) => s !== "");
}

/** A path that reads back as `segments` (each percent-encoded where it must be). */
export function joinSegments(segments: readonly string[]): string {
  return `/${segments.map((s) => encodeURIComponent(s)).join("/")}`;
}
