/**
 * Reading the recorded kube-apiserver transcripts in
 * `test/fixtures/kube-apiserver/` (format: that folder's README, "File
 * format"): `NAME.request.txt` is a request line, headers, a blank line and a
 * `# decoded query:` comment; `NAME.response.txt` is a status line, headers, a
 * blank line and the body, or a `# body:` marker when the exact bytes are in
 * `NAME.body.bin` (protobuf).
 *
 * Read-only and synchronous: for tests, not for product code.
 */
import { findFixtures, hasFixture, readFixture, readFixtureText } from "./fixtures.ts";

export interface RecordedRequest {
  readonly method: string;
  /** The path without the query, e.g. `/api/v1/pods`. */
  readonly path: string;
  /** The raw query, decoded by URLSearchParams (`+` and `%20` both become a space). */
  readonly query: URLSearchParams;
  /** Lower-case header names. */
  readonly headers: Readonly<Record<string, string>>;
}

export interface RecordedResponse {
  /** e.g. 200; HTTP/2 transcripts have no reason phrase, which is fine. */
  readonly status: number;
  /** Lower-case header names; a repeated header keeps its last value. */
  readonly headers: Readonly<Record<string, string>>;
  /** The exact body bytes (from `NAME.body.bin` when the transcript points there). */
  readonly body: Buffer;
}

export interface RecordedCase {
  /** Directory relative to the fixtures root, e.g. `kube-apiserver/gate-on/pods`. */
  readonly dir: string;
  /** Case name, e.g. `list-uid-low`. */
  readonly name: string;
  readonly request: RecordedRequest;
  readonly response: RecordedResponse;
}

/** Splits `head\n\nbody` at the first blank line; the body keeps its bytes exactly. */
function splitHead(bytes: Buffer): { head: string[]; body: Buffer } {
  const at = bytes.indexOf("\n\n");
  if (at < 0) return { head: bytes.toString("utf8").split("\n"), body: Buffer.alloc(0) };
  return { head: bytes.subarray(0, at).toString("utf8").split("\n"), body: bytes.subarray(at + 2) };
}

function parseHeaders(lines: readonly string[]): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(":");
    if (colon <= 0) continue;
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return headers;
}

/** Parses a `NAME.request.txt` transcript. */
export function parseRequest(text: string): RecordedRequest {
  const { head } = splitHead(Buffer.from(text, "utf8"));
  const [method = "", target = ""] = (head[0] ?? "").split(" ");
  const q = target.indexOf("?");
  return {
    method,
    path: q < 0 ? target : target.slice(0, q),
    query: new URLSearchParams(q < 0 ? "" : target.slice(q + 1)),
    headers: parseHeaders(head.slice(1)),
  };
}

/** Parses a `NAME.response.txt` transcript; `binBody` replaces a `# body:` marker. */
export function parseResponse(bytes: Buffer, binBody?: Buffer): RecordedResponse {
  const { head, body } = splitHead(bytes);
  const status = Number((head[0] ?? "").split(" ")[1]);
  const marker = body.subarray(0, 7).toString("latin1") === "# body:";
  return { status, headers: parseHeaders(head.slice(1)), body: marker && binBody !== undefined ? binBody : body };
}

/** Reads one recorded case: `dir` relative to the fixtures root, `name` without suffix. */
export function readCase(dir: string, name: string): RecordedCase {
  const base = `${dir}/${name}`;
  const bin = `${base}.body.bin`;
  return {
    dir,
    name,
    request: parseRequest(readFixtureText(`${base}.request.txt`)),
    response: parseResponse(readFixture(`${base}.response.txt`), hasFixture(bin) ? readFixture(bin) : undefined),
  };
}

function globToRegExp(glob: string): RegExp {
  let re = "";
  for (let i = 0; i < glob.length; i++) {
    const ch = glob[i] as string;
    if (ch === "*") {
      if (glob[i + 1] === "*") {
        re += ".*";
        i++;
      } else re += "[^/]*";
    } else if (ch === "?") re += "[^/]";
    else if (ch === "{") {
      const close = glob.indexOf("}", i);
      re += `(?:${glob.slice(i + 1, close).split(",").map(escapeRe).join("|")})`;
      i = close;
    } else re += escapeRe(ch);
  }
  return new RegExp(`^${re}$`);
}

function escapeRe(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/**
 * Lists recorded cases whose `dir/name` matches a glob, sorted: `*` matches
 * within one path segment, `**` across segments, `?` one character, and
 * `{a,b}` alternatives. Example: `*\/gate-{on,off}/*\/list-*`.
 */
export function listCases(glob: string): Array<{ dir: string; name: string }> {
  const re = globToRegExp(glob);
  return findFixtures(".request.txt")
    .map((file) => file.slice(0, -".request.txt".length))
    .filter((id) => re.test(id))
    .sort()
    .map((id) => {
      const slash = id.lastIndexOf("/");
      return { dir: id.slice(0, slash), name: id.slice(slash + 1) };
    });
}
