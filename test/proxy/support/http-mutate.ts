/**
 * Mutations of HTTP requests for the proxy fuzzer, at three levels: the
 * request's parts (path, query, method, version, headers, body), its bytes
 * (flipped, cut, pipelined with others, not HTTP at all), and the client's
 * behaviour (slow, vanishing mid-request or mid-watch, resetting, giving up
 * mid-TLS-handshake). Each mutation notes what it did.
 */
import type { Random } from "../../support/fuzz/random.ts";
import { mutateJson, mutateText, render, type Json, type Mutated } from "../../support/fuzz/json-mutate.ts";
import type { ClientEnd } from "../../support/fuzz/raw-http.ts";
import { formatBound } from "../../../src/shard/hash.ts";
import { cloneRequest, serialize, type RequestModel } from "./fuzz-corpus.ts";

export interface Plan {
  /** The requests as made, before byte damage. */
  readonly messages: readonly RequestModel[];
  /**
   * The method of each request on the wire, in order, to read the answers by
   * (a HEAD's has no body). A message whose bytes were damaged into empty
   * lines is none: node skips empty lines before a request line.
   */
  readonly methods: readonly string[];
  /** The tokens each message carries in `Authorization`, in order (the controller's own credentials, which the proxy forwards). */
  readonly tokens: readonly string[];
  readonly writes: readonly Buffer[];
  readonly gapMs: number;
  readonly end: ClientEnd;
  readonly abortHandshakeMs?: number;
  /** What was done to the corpus requests. */
  readonly notes: readonly string[];
}

const NAMESPACES = ["ns-0", "ns-1", "ns-2", "watch", "pods", "default"];
const RESOURCES = ["pods", "configmaps", "leases", "services", "secrets", "namespaces", "events", "configmaps/x", "pods/log"];
const BAD_ESCAPES = ["%zz", "%", "%4", "%g1", "%%", "%2", "%-1", "%zz%zz"];
const ODD_BYTES = ["%ff", "%c3", "%80", "%ed%a0%80", "%c0%af", "%00", "\xff", "\xc3\xa9", "%e2%82", "%2F", "%2f", "%5C", "%20", "+", "é"];
const DOTS = ["/..", "/.", "/%2e%2e", "/%2E%2e", "/.%2e", "/%2e", "/..%2F..", "%2F..%2F..", "/../.."];
const QUERY_KEYS = ["shardSelector", "watch", "resourceVersion", "resourceVersionMatch", "labelSelector", "fieldSelector", "limit", "continue", "sendInitialEvents", "allowWatchBookmarks", "timeoutSeconds", "timeout", "includeObject", "pretty", "w%61tch", "shard%53elector"];
const ODD_VALUES = ["", "0", "1", "true", "True", "TRUE", "false", "FALSE", "False", "yes", "no", "t", "f", "%zz", "%ff", "-1", "99999999999999999999", "é", "%C3%A9", "+", "%26", "%3D", "a=b", "a;b", "1e3", "0x10", " 1"];
const ACCEPTS = [
  "application/json",
  "application/vnd.kubernetes.protobuf",
  "application/vnd.kubernetes.protobuf;stream=watch",
  "application/json;as=Table;v=v1;g=meta.k8s.io",
  "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io",
  "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io",
  "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
  "application/yaml",
  "text/html",
  "*/*",
  "application/*",
  "",
  ",,,",
  ";;;",
  "application/json;q=0",
  "application/json; charset=utf-8",
  "APPLICATION/JSON",
];
const METHODS = ["HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT", "FOO", "get", "GET\x00", "M-SEARCH", "PROPFIND", "PRI"];
const VERSIONS = ["HTTP/1.0", "HTTP/1.2", "HTTP/2.0", "HTTP/0.9", "HTTP/1.1 x", "", "http/1.1", "HTTP/1.1\r"];

/** A shard selector: valid, invalid, or pathological (deep, long, odd). */
function shardSelectorValue(rnd: Random): string {
  const bound = (): string => formatBound(BigInt(rnd.u32()) * 2n ** 32n + BigInt(rnd.u32()));
  const range = (key = rnd.pick(["uid", "namespace"])): string => {
    const [a, b] = [bound(), bound()].sort();
    return `shardRange(object.metadata.${key}, '${a}', '${b}')`;
  };
  const v = rnd.weighted<() => string>([
    [4, () => range()],
    [2, () => Array.from({ length: rnd.between(2, 6) }, () => range("uid")).join(" || ")],
    // Nesting around CEL's limit (250), and past any parser's stack: a URL
    // holds 16 KiB, and "(" is not escaped.
    [1, () => `${"(".repeat(rnd.between(240, 260))}${range()}${")".repeat(rnd.between(240, 260))}`],
    [2, () => `${"(".repeat(rnd.between(2000, 14_000))}${range()}`],
    [1, () => Array.from({ length: rnd.between(50, 300) }, () => range("uid")).join("||")],
    [1, () => `${"!".repeat(rnd.size(14_000))}x`],
    [1, () => `${"f(".repeat(rnd.between(1000, 7000))}1`],
    [1, () => `${"[".repeat(rnd.between(1000, 14_000))}1`],
    [1, () => `shardRange(object.metadata.uid, '0x0', '0x8000000000000000')`],
    [1, () => range("uid") + " && " + range("uid")],
    [1, () => `shardRange(object.metadata.uid, '${bound()}', '0x10000000000000000')`],
    [1, () => rnd.pick(["", " ", "garbage", "shardRange(", "'", '"', "\\", "shardRange(object.metadata.uid,'0x8000000000000000','0x0000000000000000')", "a".repeat(rnd.size(6000))])],
  ])();
  return encodeURIComponent(v);
}

function valueFor(rnd: Random, key: string): string {
  if (key.toLowerCase().includes("shard") && rnd.chance(0.7)) return shardSelectorValue(rnd);
  if (key === "labelSelector" && rnd.chance(0.5)) return encodeURIComponent(rnd.pick(["app=web", "app in (web,api)", "!app", "app!=x,app", "shardcar.io/none,!shardcar.io/none", "a=", "=", "(((", "app=" + "x".repeat(rnd.size(3000))]));
  if (key === "fieldSelector" && rnd.chance(0.5)) return encodeURIComponent(rnd.pick(["metadata.namespace=ns-0", "metadata.name=pod-00001", "spec.nodeName=", "x=y", "metadata.namespace!=ns-1"]));
  if (key === "resourceVersion" && rnd.chance(0.5)) return rnd.pick(["0", "", "1", "999999999", "-5", "abc", String(rnd.int(5000))]);
  return rnd.pick(ODD_VALUES);
}

function insertAt(s: string, at: number, piece: string): string {
  return s.slice(0, at) + piece + s.slice(at);
}

/** Positions just before a `/` (segment boundaries), or the end. */
function boundary(rnd: Random, path: string): number {
  const at = [...path.matchAll(/\//g)].map((m) => m.index);
  return rnd.chance(0.2) || at.length === 0 ? path.length : rnd.pick(at);
}

function setHeader(r: RequestModel, name: string, value: string): void {
  r.headers = r.headers.filter(([k]) => k.toLowerCase() !== name.toLowerCase());
  r.headers.push([name, value]);
}

/** A body, and the headers that frame it (or frame it wrongly). */
function withBody(rnd: Random, r: RequestModel, body: Buffer, notes: string[]): void {
  r.body = body;
  r.headers = r.headers.filter(([k]) => !/^(content-length|transfer-encoding)$/i.test(k));
  switch (rnd.int(6)) {
    case 0:
      r.headers.push(["Transfer-Encoding", "chunked"]);
      r.body = Buffer.concat([Buffer.from(`${body.length.toString(16)}\r\n`), body, Buffer.from("\r\n0\r\n\r\n")]);
      notes.push(`chunked body of ${body.length} bytes`);
      return;
    case 1: {
      const wrong = rnd.pick([body.length + rnd.between(1, 100), Math.max(0, body.length - rnd.between(1, 10)), 2 ** 40]);
      r.headers.push(["Content-Length", String(wrong)]);
      notes.push(`body of ${body.length} bytes with Content-Length ${wrong}`);
      return;
    }
    case 2:
      r.headers.push(["Content-Length", String(body.length)], ["Content-Length", String(body.length + 1)]);
      notes.push("two conflicting Content-Length headers");
      return;
    case 3:
      r.headers.push(["Content-Length", String(body.length)], ["Transfer-Encoding", "chunked"]);
      notes.push("Content-Length and Transfer-Encoding together");
      return;
    default:
      r.headers.push(["Content-Length", String(body.length)]);
      notes.push(`body of ${body.length} bytes`);
  }
}

/** One mutation of the request's parts, in place. */
function mutateParts(rnd: Random, r: RequestModel, notes: string[]): void {
  const kind = rnd.weighted<string>([
    [6, "bad-escape"],
    [8, "encoded-char"],
    [3, "odd-byte"],
    [3, "dot-segment"],
    [2, "slashes"],
    [2, "absolute-form"],
    [3, "namespace"],
    [2, "legacy-watch"],
    [3, "resource"],
    [2, "name-segment"],
    [1, "overlong-path"],
    [1, "case"],
    [1, "odd-target"],
    [6, "shard-selector"],
    [8, "query-dup"],
    [3, "query-drop"],
    [8, "query-add"],
    [2, "query-odd"],
    [3, "method"],
    [1, "version"],
    [4, "accept"],
    [2, "header-dup"],
    [1, "header-huge"],
    [1, "header-many"],
    [1, "header-bad"],
    [2, "upgrade"],
    [1, "expect"],
    [1, "connection"],
    // Bodies matter most where the proxy reads them: the lock's creates and updates.
    [r.body.length > 0 ? 12 : 3, "body"],
  ]);
  switch (kind) {
    case "bad-escape": {
      const at = rnd.chance(0.5) ? r.path.length : rnd.int(r.path.length + 1);
      const piece = rnd.pick(BAD_ESCAPES);
      r.path = insertAt(r.path, at, piece);
      notes.push(`malformed escape ${JSON.stringify(piece)} in the path`);
      return;
    }
    case "encoded-char": {
      // The same path to the apiserver (it decodes first), another to
      // anyone who reads it without decoding.
      const letters = [...r.path.matchAll(/[a-z0-9/]/g)].map((m) => m.index);
      if (letters.length === 0) return;
      const at = rnd.pick(letters);
      const c = r.path[at] as string;
      const code = `%${c.charCodeAt(0).toString(16).padStart(2, "0")}`;
      r.path = r.path.slice(0, at) + (rnd.chance(0.5) ? code.toUpperCase() : code) + r.path.slice(at + 1);
      notes.push(`${JSON.stringify(c)} percent-encoded in the path`);
      return;
    }
    case "odd-byte": {
      const piece = rnd.pick(ODD_BYTES);
      r.path = insertAt(r.path, rnd.int(r.path.length + 1), piece);
      notes.push(`${JSON.stringify(piece)} in the path`);
      return;
    }
    case "dot-segment": {
      const piece = rnd.pick(DOTS);
      const extra = rnd.chance(0.5) ? `/${rnd.pick(["x", "ns-0", "namespaces/ns-0", "apps"])}` : "";
      r.path = insertAt(r.path, boundary(rnd, r.path), extra + piece);
      notes.push(`dot segment ${JSON.stringify(extra + piece)}`);
      return;
    }
    case "slashes": {
      const how = rnd.int(4);
      if (how === 0) r.path = r.path.replace(/\//g, () => (rnd.chance(0.3) ? "//" : "/"));
      else if (how === 1) r.path += "/";
      else if (how === 2) r.path = r.path.replace(/\//g, () => (rnd.chance(0.3) ? "\\" : "/"));
      else r.path = r.path.replace(/\//g, (m, i: number) => (i > 0 && rnd.chance(0.4) ? "%2F" : m));
      notes.push(["doubled slashes", "trailing slash", "backslashes", "encoded slashes"][how] as string);
      return;
    }
    case "absolute-form": {
      const prefix = rnd.pick(["http://127.0.0.1:1", "https://evil.invalid", "//evil.invalid", "http://x@y", "//", "http://[::1]", "ftp://x"]);
      r.path = prefix + r.path;
      notes.push(`target prefixed with ${prefix}`);
      return;
    }
    case "namespace": {
      const ns = rnd.pick([...NAMESPACES, "%zz", "", "x".repeat(rnd.size(300)), "NS", "ns-0%2Fx", "%ff", "ns%c3", "n%73-0"]);
      r.path = r.path.replace(/^\/api\/v1|^\/apis\/[^/]+\/[^/]+/, (m) => `${m}/namespaces/${ns}`);
      notes.push(`namespace ${JSON.stringify(ns)}`);
      return;
    }
    case "legacy-watch":
      r.path = r.path.replace(/^\/api\/v1|^\/apis\/[^/]+\/[^/]+/, (m) => `${m}/${rnd.pick(["watch", "%77atch", "Watch", "watch/watch"])}`);
      notes.push("legacy /watch/ segment");
      return;
    case "resource": {
      const res = rnd.pick(RESOURCES);
      r.path = r.path.replace(/pods(?=$|\/|\?)/, res).replace(/p(?=ods)/, rnd.chance(0.3) ? "%70" : "p");
      notes.push(`resource ${res}`);
      return;
    }
    case "name-segment": {
      const name = rnd.pick(["pod-00001", "x", "status", "log", "exec", "proxy", "pod-00001/status", "%zz", "..", ""]);
      r.path += `/${name}`;
      notes.push(`name segment ${JSON.stringify(name)}`);
      return;
    }
    case "overlong-path": {
      const n = rnd.size(24_000);
      r.path += `/${"a".repeat(n)}`;
      notes.push(`path made ${n} bytes longer`);
      return;
    }
    case "case":
      r.path = r.path.replace(/[a-z]/g, (c) => (rnd.chance(0.2) ? c.toUpperCase() : c));
      notes.push("upper-case letters in the path");
      return;
    case "odd-target": {
      const t = rnd.pick(["*", "", "?", "?watch=true", "/?", "#frag", "/api/v1/pods#x", "/api/v1/pods?#", "/%", "/\t", "/ /"]);
      r.path = t;
      if (rnd.chance(0.5)) r.query = [];
      notes.push(`request target ${JSON.stringify(t)}`);
      return;
    }
    case "shard-selector": {
      const part = `shardSelector=${shardSelectorValue(rnd)}`;
      const i = r.query.findIndex((q) => q.startsWith("shardSelector="));
      if (i >= 0 && rnd.chance(0.6)) r.query[i] = part;
      else r.query.splice(rnd.int(r.query.length + 1), 0, part);
      notes.push(`shardSelector ${JSON.stringify(decodeURIComponent(part.slice(14)).slice(0, 60))}…`);
      return;
    }
    case "query-dup": {
      const key = r.query.length > 0 && rnd.chance(0.6) ? (r.query[rnd.int(r.query.length)]?.split("=")[0] ?? "watch") : rnd.pick(QUERY_KEYS);
      const part = `${key}=${valueFor(rnd, key)}`;
      if (rnd.chance(0.5)) r.query.unshift(part);
      else r.query.push(part);
      notes.push(`duplicate query parameter ${key}`);
      return;
    }
    case "query-drop":
      if (r.query.length > 0) r.query.splice(rnd.int(r.query.length), 1);
      notes.push("a query parameter dropped");
      return;
    case "query-add": {
      const key = rnd.pick(QUERY_KEYS);
      r.query.splice(rnd.int(r.query.length + 1), 0, `${key}=${valueFor(rnd, key)}`);
      notes.push(`query parameter ${key}`);
      return;
    }
    case "query-odd": {
      const piece = rnd.pick(["", "=", "&", "&&&", "watch", "=true", "a;watch=true", "watch=true;x=1", "%zz=%zz", "watch=%zz", "x".repeat(rnd.size(8000))]);
      r.query.splice(rnd.int(r.query.length + 1), 0, piece);
      notes.push(`odd query part ${JSON.stringify(piece.slice(0, 30))}`);
      return;
    }
    case "method":
      r.method = rnd.pick(METHODS);
      notes.push(`method ${JSON.stringify(r.method)}`);
      return;
    case "version":
      r.version = rnd.pick(VERSIONS);
      notes.push(`version ${JSON.stringify(r.version)}`);
      return;
    case "accept": {
      const a = rnd.chance(0.8) ? rnd.pick(ACCEPTS) : `${rnd.pick(ACCEPTS)},${rnd.pick(ACCEPTS)}`;
      if (rnd.chance(0.2)) r.headers = r.headers.filter(([k]) => k.toLowerCase() !== "accept");
      else if (rnd.chance(0.3)) r.headers.push(["Accept", a]);
      else setHeader(r, "Accept", a);
      notes.push(`Accept ${JSON.stringify(a)}`);
      return;
    }
    case "header-dup": {
      const h = r.headers[rnd.int(r.headers.length)] ?? ["Host", "x"];
      r.headers.push([h[0], rnd.chance(0.5) ? h[1] : "other"]);
      if (rnd.chance(0.3)) r.headers.push(["Host", "second.invalid"]);
      notes.push(`header ${h[0]} repeated`);
      return;
    }
    case "header-huge": {
      const n = rnd.size(40_000);
      r.headers.push([rnd.pick(["X-Big", "Accept", "User-Agent", "Cookie"]), "v".repeat(n)]);
      notes.push(`a header of ${n} bytes`);
      return;
    }
    case "header-many": {
      const n = rnd.between(50, 3000);
      for (let i = 0; i < n; i++) r.headers.push([`X-H${i}`, String(i)]);
      notes.push(`${n} extra headers`);
      return;
    }
    case "header-bad": {
      const h = rnd.pick<[string, string]>([
        ["X Bad", "1"],
        ["X-Bad ", "1"],
        ["", "empty name"],
        ["X-Ctl", "a\x00b"],
        ["X-Fold", "a\r\n\tcontinued"],
        ["X-Lf", "a\nb"],
        ["X-Utf8", "\xc3\xa9"],
        ["Content-Length", "-1"],
        ["Content-Length", "abc"],
        ["Transfer-Encoding", "gzip, chunked"],
        ["Transfer-Encoding", "identity"],
      ]);
      r.headers.push(h);
      notes.push(`header ${JSON.stringify(h)}`);
      return;
    }
    case "upgrade": {
      const proto = rnd.pick(["websocket", "SPDY/3.1", "h2c", "foo", "WebSocket"]);
      setHeader(r, "Connection", "Upgrade");
      setHeader(r, "Upgrade", proto);
      if (proto.toLowerCase() === "websocket") r.headers.push(["Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="], ["Sec-WebSocket-Version", "13"]);
      notes.push(`Upgrade: ${proto}`);
      return;
    }
    case "expect":
      setHeader(r, "Expect", rnd.pick(["100-continue", "something-else"]));
      if (r.body.length === 0 && rnd.chance(0.5)) withBody(rnd, r, Buffer.from("{}"), notes);
      notes.push("Expect header");
      return;
    case "connection":
      setHeader(r, "Connection", rnd.pick(["close", "keep-alive", "close, keep-alive", "TE", "Upgrade"]));
      notes.push("Connection header");
      return;
    case "body": {
      let body: Buffer;
      if (r.body.length > 0 && rnd.chance(0.7)) {
        let doc: Json | undefined;
        try {
          doc = JSON.parse(r.body.toString("utf8")) as Json;
        } catch {
          doc = undefined;
        }
        const m = doc !== undefined && rnd.chance(0.6) ? mutateParsed(rnd, doc) : undefined;
        const t = m === undefined ? mutateText(rnd, r.body) : { value: render(m.value), did: m.did };
        body = t.value;
        notes.push(`body: ${t.did}`);
      } else {
        body = rnd.weighted<Buffer>([
          [3, Buffer.from("{}")],
          [2, rnd.bytes(rnd.size(4096))],
          [1, Buffer.from("null")],
          [1, Buffer.alloc(rnd.size(2 * 1024 * 1024), "x")],
        ]);
        notes.push("a body");
      }
      withBody(rnd, r, body, notes);
      return;
    }
  }
}

/** Damage to the serialized bytes. */
function mutateBytes(rnd: Random, bytes: Buffer, notes: string[]): Buffer {
  switch (rnd.int(6)) {
    case 0: {
      const at = rnd.int(bytes.length);
      const b = Buffer.from(bytes);
      b[at] = rnd.int(256);
      notes.push(`byte ${at} set to 0x${(b[at]).toString(16)}`);
      return b;
    }
    case 1: {
      const at = rnd.int(bytes.length);
      notes.push(`cut after ${at} of ${bytes.length} bytes`);
      return bytes.subarray(0, at);
    }
    case 2:
      notes.push("bare LF line ends");
      return Buffer.from(bytes.toString("latin1").replace(/\r\n/g, "\n"), "latin1");
    case 3: {
      const at = rnd.int(bytes.length);
      const junk = rnd.bytes(rnd.size(64));
      notes.push(`${junk.length} random bytes inserted at ${at}`);
      return Buffer.concat([bytes.subarray(0, at), junk, bytes.subarray(at)]);
    }
    case 4:
      notes.push("garbage after the request");
      return Buffer.concat([bytes, Buffer.from(rnd.pick(["\r\n", "\r\n\r\n", "GARBAGE\r\n\r\n", "0\r\n\r\n", "\x16\x03\x01"]), "latin1")]);
    default: {
      const what = rnd.pick(["PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", "\r\n\r\n", "GET\r\n\r\n", ""]);
      notes.push(`not HTTP/1.1: ${JSON.stringify(what.slice(0, 16))}`);
      return Buffer.from(what, "latin1");
    }
  }
}

/**
 * A structural mutation of a parsed body, or undefined when the body is
 * nested deeper than a copy can go (an earlier mutation's 20,000 levels):
 * its text is damaged instead.
 */
function mutateParsed(rnd: Random, doc: Json): Mutated<Json> | undefined {
  try {
    return mutateJson(rnd, doc);
  } catch (e) {
    if (e instanceof RangeError) return undefined;
    throw e;
  }
}

/** A corpus request as recorded, read to its end (a watch: for `watchMs`). */
export function unmutatedPlan(r: RequestModel, token: string, watchMs: number): Plan {
  return {
    messages: [r],
    methods: [r.method],
    tokens: [token],
    writes: [serialize(r, [["Authorization", `Bearer ${token}`], ["Host", "127.0.0.1"]])],
    gapMs: 0,
    end: isWatch(r) ? { kind: "read-for", ms: watchMs } : { kind: "read", maxMs: 30_000, expect: 1 },
    notes: [],
  };
}

function isWatch(r: RequestModel): boolean {
  return r.query.some((q) => /^watch=(?!0|false)/i.test(q)) || r.path.includes("/watch/");
}

/**
 * A plan for one case: 1 to 4 pipelined requests taken from `corpus`, each
 * with up to 3 mutations of its parts, sometimes byte damage, and one client
 * behaviour. Every message carries `Authorization: Bearer <token>` first.
 */
export function planCase(rnd: Random, corpus: readonly RequestModel[], tokenPrefix: string, tls: boolean): Plan {
  const notes: string[] = [];
  const count = rnd.weighted<number>([
    [12, 1],
    [2, 2],
    [1, rnd.between(3, 4)],
  ]);
  const messages: RequestModel[] = [];
  const methods: string[] = [];
  const tokens: string[] = [];
  const writes: Buffer[] = [];
  for (let k = 0; k < count; k++) {
    const r = cloneRequest(rnd.pick(corpus));
    const n = rnd.weighted<number>([
      [2, 0],
      [6, 1],
      [4, 2],
      [2, 3],
    ]);
    for (let j = 0; j < n; j++) mutateParts(rnd, r, notes);
    if (k < count - 1 && !r.headers.some(([h]) => /^connection$/i.test(h))) r.headers.push(["Connection", "keep-alive"]);
    const token = `${tokenPrefix}-${k}`;
    let bytes = serialize(r, [["Authorization", `Bearer ${token}`], ["Host", "127.0.0.1"]]);
    if (rnd.chance(0.08)) bytes = mutateBytes(rnd, bytes, notes);
    messages.push(r);
    if (!/^[\r\n]*$/.test(bytes.toString("latin1"))) methods.push(r.method);
    tokens.push(token);
    writes.push(bytes);
  }
  const all = Buffer.concat(writes);
  // Slow clients write in pieces; the parser must cope with any split.
  const pieces = rnd.chance(0.15) ? splitInto(rnd, all, rnd.between(2, 12)) : [all];
  const watching = messages.some(isWatch);
  const end = rnd.weighted<ClientEnd>([
    [watching ? 2 : 10, { kind: "read", maxMs: 3000, expect: methods.length }],
    [watching ? 8 : 2, { kind: "read-for", ms: rnd.between(5, 300) }],
    [1, { kind: "vanish" }],
    [1, { kind: "reset", ms: rnd.between(0, 300) }],
  ]);
  notes.push(`client: ${end.kind}${"ms" in end ? ` ${end.ms} ms` : ""}${pieces.length > 1 ? `, ${pieces.length} pieces` : ""}`);
  const abortHandshakeMs = tls && rnd.chance(0.03) ? rnd.int(5) : undefined;
  if (abortHandshakeMs !== undefined) notes.push(`gives up ${abortHandshakeMs} ms into the TLS handshake`);
  return { messages, methods, tokens, writes: pieces, gapMs: pieces.length > 1 ? rnd.between(0, 15) : 0, end, notes, ...(abortHandshakeMs === undefined ? {} : { abortHandshakeMs }) };
}

function splitInto(rnd: Random, bytes: Buffer, n: number): Buffer[] {
  const cuts = Array.from({ length: n - 1 }, () => rnd.int(bytes.length + 1)).sort((a, b) => a - b);
  const out: Buffer[] = [];
  let last = 0;
  for (const c of [...cuts, bytes.length]) {
    out.push(bytes.subarray(last, c));
    last = c;
  }
  return out.filter((b) => b.length > 0);
}

/** The plan as a finding prints it: the exact bytes, escaped, and the notes. */
export function describePlan(p: Plan): string {
  const bytes = Buffer.concat(p.writes);
  const shown = bytes.length > 3000 ? `${JSON.stringify(bytes.subarray(0, 3000).toString("latin1"))} … (${bytes.length} bytes)` : JSON.stringify(bytes.toString("latin1"));
  return [`bytes: ${shown}`, `mutations: ${p.notes.join("; ")}`].join("\n");
}
