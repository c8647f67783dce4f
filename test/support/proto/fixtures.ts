/**
 * The protobuf recordings under test/fixtures/kube-apiserver: every
 * `*.body.bin`, with the selector its request sent and how the server
 * answered. Discovered, not listed, so a new recording is a new test case.
 */
import { HashMatcher } from "../../../src/shard/range.ts";
import { formatSelector, parseSelector, type ShardSelector } from "../../../src/shard/selector.ts";
import { findFixtures, readFixture, readFixtureText } from "../fixtures.ts";

export interface ProtoCase {
  /** e.g. `kube-apiserver/gate-on/pods/pb-list-uid-low`. */
  readonly name: string;
  readonly server: string;
  readonly gate: "gate-on" | "gate-off";
  readonly resource: string;
  /** The file name without suffix, e.g. `pb-list-uid-low`. */
  readonly caseName: string;
  readonly status: number;
  readonly contentType: string;
  readonly watch: boolean;
  readonly body: Buffer;
  readonly query: ReadonlyMap<string, string>;
  /** The request's selector, parsed; undefined when none was sent or it is invalid (see `selectorText`). */
  readonly selector: ShardSelector | undefined;
  readonly selectorText: string | undefined;
}

function decodedQuery(requestTxt: string): Map<string, string> {
  const line = requestTxt.split("\n").find((l) => l.startsWith("# decoded query: "));
  const q = new Map<string, string>();
  if (line === undefined) return q;
  const url = line.slice("# decoded query: ".length);
  const at = url.indexOf("?");
  if (at < 0) return q;
  for (const part of url.slice(at + 1).split("&")) {
    const eq = part.indexOf("=");
    const k = eq < 0 ? part : part.slice(0, eq);
    // Only the first value counts, as on the server.
    if (!q.has(k)) q.set(k, eq < 0 ? "" : part.slice(eq + 1));
  }
  return q;
}

function tryParse(text: string): ShardSelector | undefined {
  try {
    return parseSelector(text);
  } catch {
    // The invalid-selector recordings: the server answered with a Status.
    return undefined;
  }
}

/** All protobuf recordings, sorted by name. */
export function protoCases(): ProtoCase[] {
  return findFixtures(".body.bin").map((file) => {
    const name = file.slice(0, -".body.bin".length);
    const [server = "", gate = "", resource = "", caseName = ""] = name.split("/");
    const response = readFixtureText(`${name}.response.txt`);
    const status = Number(/^HTTP\/\S+ (\d+)/.exec(response)?.[1] ?? "0");
    const contentType = /^content-type: *(.*)$/im.exec(response)?.[1]?.trim() ?? "";
    const query = decodedQuery(readFixtureText(`${name}.request.txt`));
    const sel = query.get("shardSelector");
    return {
      name,
      server,
      gate: gate === "gate-off" ? "gate-off" : "gate-on",
      resource,
      caseName,
      status,
      contentType,
      watch: /stream=watch/.test(contentType),
      body: readFixture(file),
      query,
      selector: sel === undefined || sel.trim() === "" ? undefined : tryParse(sel),
      selectorText: sel,
    };
  });
}

/** The matcher and canonical selector string a proxy would use for this case's selector. */
export function matcherFor(sel: ShardSelector): { matcher: HashMatcher; sentSelector: string } {
  return { matcher: new HashMatcher(sel.ranges), sentSelector: formatSelector(sel) };
}
