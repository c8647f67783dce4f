/**
 * KEP-5866 shard selectors: the canonical printer, and a parser that accepts
 * exactly what a 1.36 apiserver accepts and rejects the rest with the server's
 * own wording (k8s.io/apiserver/pkg/sharding/parser.go), so devapi can answer
 * like the real thing and operators see familiar messages.
 *
 * The server parses the value as CEL and walks the AST without evaluating it.
 * We do the same with a small CEL-shaped expression parser: enough of the
 * grammar to accept quotes, whitespace, comments and parentheses, and to name
 * operators the way CEL does (`_&&_`, `_>_`) when refusing them.
 */
import { SelectorSyntaxError } from "../errors.ts";
import { formatBound } from "./hash.ts";
import { KEYSPACE_END, makeRange, normalize, type Range } from "./range.ts";

export type ShardKeyPath = "object.metadata.uid" | "object.metadata.namespace";
export type ShardKey = "uid" | "namespace";

export const KEY_PATHS: Readonly<Record<ShardKey, ShardKeyPath>> = {
  uid: "object.metadata.uid",
  namespace: "object.metadata.namespace",
};

export function keyOfPath(path: ShardKeyPath): ShardKey {
  return path === "object.metadata.uid" ? "uid" : "namespace";
}

export interface ShardSelector {
  readonly key: ShardKey;
  /** In the order written; duplicates and overlaps kept, as the server echoes them. */
  readonly ranges: readonly Range[];
}

/** CEL's expression size limit, in code points; the server refuses larger selectors. */
export const MAX_SELECTOR_CODE_POINTS = 100_000;

/**
 * cel-go's parser recursion limit (`maxRecursionDepth`, default 250): how
 * deeply expressions may nest (parentheses, arguments, list elements,
 * indexes, ternary branches). Also what keeps this parser's own stack
 * bounded, whatever a request or an annotation holds.
 */
export const MAX_SELECTOR_NESTING = 250;

/**
 * Prints ranges exactly as the server echoes them in `shardInfo.selector`.
 * Callers that build selectors for the wire should pass normalised ranges;
 * see {@link canonicalSelector}.
 */
export function formatSelector(sel: ShardSelector): string {
  const path = KEY_PATHS[sel.key];
  return sel.ranges
    .map((r) => `shardRange(${path}, '${formatBound(r.start)}', '${formatBound(r.end)}')`)
    .join(" || ");
}

/**
 * The one selector string shardcar sends for a set of ranges: merged, sorted,
 * zero-padded. Returns `undefined` when the set is empty, because no selector
 * can express "nothing" (callers add a match-nothing label selector instead).
 */
export function canonicalSelector(key: ShardKey, ranges: readonly Range[]): string | undefined {
  const merged = normalize(ranges);
  if (merged.length === 0) return undefined;
  return formatSelector({ key, ranges: merged });
}

// ---------------------------------------------------------------------------
// Parsing

type Node =
  | { kind: "ident"; name: string }
  | { kind: "select"; operand: Node; field: string }
  | { kind: "call"; fn: string; target?: Node; args: Node[] }
  | { kind: "literal"; value: string | number | boolean | null }
  | { kind: "list" | "map" };

type Token =
  | { t: "ident"; v: string; at: number }
  | { t: "string"; v: string; at: number }
  | { t: "number"; v: number; text: string; at: number }
  | { t: "op"; v: string; at: number }
  | { t: "eof"; at: number };

function syntaxError(detail: string): SelectorSyntaxError {
  return new SelectorSyntaxError(`CEL parse error: Syntax error: ${detail}`);
}

const OPERATORS = ["||", "&&", "==", "!=", "<=", ">=", "<", ">", "+", "-", "*", "/", "%", "!", "?", ":", "(", ")", "[", "]", "{", "}", ",", "."];

function tokenize(src: string): Token[] {
  const out: Token[] = [];
  let i = 0;
  while (i < src.length) {
    const c = src[i] as string;
    if (c === " " || c === "\t" || c === "\n" || c === "\r" || c === "\f") {
      i++;
      continue;
    }
    if (src.startsWith("//", i)) {
      while (i < src.length && src[i] !== "\n") i++;
      continue;
    }
    if (/[A-Za-z_]/.test(c)) {
      let j = i + 1;
      while (j < src.length && /[A-Za-z0-9_]/.test(src[j] as string)) j++;
      const word = src.slice(i, j);
      // Raw and byte string prefixes: r'..', b'..'.
      if (/^[rRbB]{1,2}$/.test(word) && (src[j] === "'" || src[j] === '"')) {
        const { value, next } = readString(src, j, /[rR]/.test(word));
        out.push({ t: "string", v: value, at: i });
        i = next;
        continue;
      }
      out.push({ t: "ident", v: word, at: i });
      i = j;
      continue;
    }
    if (/[0-9]/.test(c)) {
      const m = /^(0x[0-9a-fA-F]+|[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?)u?/.exec(src.slice(i)) as RegExpExecArray;
      out.push({ t: "number", v: Number(m[1]), text: m[0], at: i });
      i += m[0].length;
      continue;
    }
    if (c === "'" || c === '"') {
      const { value, next } = readString(src, i, false);
      out.push({ t: "string", v: value, at: i });
      i = next;
      continue;
    }
    const op = OPERATORS.find((o) => src.startsWith(o, i));
    if (op === undefined) throw syntaxError(`token recognition error at: '${c}'`);
    out.push({ t: "op", v: op, at: i });
    i += op.length;
  }
  out.push({ t: "eof", at: src.length });
  return out;
}

function readString(src: string, start: number, raw: boolean): { value: string; next: number } {
  const q = src[start] as string;
  const triple = src.startsWith(q.repeat(3), start);
  const close = triple ? q.repeat(3) : q;
  let i = start + close.length;
  let value = "";
  while (i < src.length) {
    if (src.startsWith(close, i)) return { value, next: i + close.length };
    const c = src[i] as string;
    if (!triple && (c === "\n" || c === "\r")) break;
    if (c === "\\" && !raw) {
      const e = src[i + 1];
      const simple: Record<string, string> = { n: "\n", t: "\t", r: "\r", "\\": "\\", "'": "'", '"': '"', "`": "`", "?": "?", a: "\x07", b: "\b", f: "\f", v: "\v" };
      if (e !== undefined && e in simple) {
        value += simple[e];
        i += 2;
        continue;
      }
      throw syntaxError(`token recognition error at: '${src.slice(start, i + 2)}'`);
    }
    value += c;
    i++;
  }
  // ANTLR reports the whole unterminated literal as the unrecognised token.
  throw syntaxError(`token recognition error at: '${src.slice(start, i)}'`);
}

const BINARY: Record<string, { prec: number; fn: string }> = {
  "||": { prec: 1, fn: "_||_" },
  "&&": { prec: 2, fn: "_&&_" },
  "==": { prec: 3, fn: "_==_" },
  "!=": { prec: 3, fn: "_!=_" },
  "<": { prec: 3, fn: "_<_" },
  "<=": { prec: 3, fn: "_<=_" },
  ">": { prec: 3, fn: "_>_" },
  ">=": { prec: 3, fn: "_>=_" },
  in: { prec: 3, fn: "@in" },
  "+": { prec: 4, fn: "_+_" },
  "-": { prec: 4, fn: "_-_" },
  "*": { prec: 5, fn: "_*_" },
  "/": { prec: 5, fn: "_/_" },
  "%": { prec: 5, fn: "_%_" },
};

function describe(tok: Token): string {
  switch (tok.t) {
    case "eof":
      return "<EOF>";
    case "string":
      return `'${tok.v}'`;
    case "number":
      return tok.text;
    default:
      return tok.v;
  }
}

function recursionLimit(): SelectorSyntaxError {
  return new SelectorSyntaxError(`CEL parse error: expression recursion limit exceeded: ${MAX_SELECTOR_NESTING}`);
}

class ExprParser {
  private pos = 0;
  /** Nesting of expressions being parsed, as cel-go counts its `expr` rule. */
  private depth = 0;
  private readonly toks: Token[];
  constructor(toks: Token[]) {
    this.toks = toks;
  }

  private peek(): Token {
    return this.toks[this.pos] as Token;
  }
  private next(): Token {
    return this.toks[this.pos++] as Token;
  }
  private isOp(v: string): boolean {
    const t = this.peek();
    return (t.t === "op" || t.t === "ident") && t.v === v;
  }
  private expect(v: string): void {
    const t = this.next();
    if (!((t.t === "op" || t.t === "ident") && t.v === v)) {
      throw syntaxError(`mismatched input '${describe(t)}' expecting '${v}'`);
    }
  }

  parseAll(): Node {
    const e = this.parseExpr();
    const t = this.peek();
    if (t.t !== "eof") throw syntaxError(`mismatched input '${describe(t)}' expecting <EOF>`);
    return e;
  }

  private parseExpr(): Node {
    if (++this.depth > MAX_SELECTOR_NESTING) throw recursionLimit();
    const cond = this.parseBinary(1);
    let node = cond;
    if (this.isOp("?")) {
      this.next();
      const a = this.parseBinary(1);
      this.expect(":");
      const b = this.parseExpr();
      node = { kind: "call", fn: "_?_:_", args: [cond, a, b] };
    }
    this.depth--;
    return node;
  }

  private parseBinary(minPrec: number): Node {
    let left = this.parseUnary();
    for (;;) {
      const t = this.peek();
      const op = (t.t === "op" || (t.t === "ident" && t.v === "in")) ? BINARY[t.v] : undefined;
      if (op === undefined || op.prec < minPrec) return left;
      this.next();
      const right = this.parseBinary(op.prec + 1);
      left = { kind: "call", fn: op.fn, args: [left, right] };
    }
  }

  /**
   * A run of `!` (or `-`) folds as cel-go folds it: an even count cancels
   * out, an odd one is a single call. A loop, so a long run costs no stack.
   */
  private parseUnary(): Node {
    const ops: string[] = [];
    for (let t = this.peek(); t.t === "op" && (t.v === "!" || t.v === "-"); t = this.peek()) {
      ops.push(t.v);
      this.next();
    }
    let node = this.parseMember();
    const same = ops.every((o) => o === ops[0]);
    const apply = same ? ops.slice(0, ops.length % 2) : ops.reverse();
    for (const o of apply) node = { kind: "call", fn: o === "!" ? "!_" : "-_", args: [node] };
    return node;
  }

  private parseMember(): Node {
    let node = this.parsePrimary();
    for (;;) {
      if (this.isOp(".")) {
        this.next();
        const t = this.next();
        if (t.t !== "ident") throw syntaxError(`mismatched input '${describe(t)}' expecting IDENTIFIER`);
        if (this.isOp("(")) {
          node = { kind: "call", fn: t.v, target: node, args: this.parseArgs() };
        } else {
          node = { kind: "select", operand: node, field: t.v };
        }
      } else if (this.isOp("[")) {
        this.next();
        const idx = this.parseExpr();
        this.expect("]");
        node = { kind: "call", fn: "_[_]", args: [node, idx] };
      } else {
        return node;
      }
    }
  }

  private parseArgs(): Node[] {
    this.expect("(");
    const args: Node[] = [];
    if (this.isOp(")")) {
      this.next();
      return args;
    }
    for (;;) {
      args.push(this.parseExpr());
      if (this.isOp(",")) {
        this.next();
        continue;
      }
      this.expect(")");
      return args;
    }
  }

  private parsePrimary(): Node {
    const t = this.next();
    switch (t.t) {
      case "ident":
        if (t.v === "true" || t.v === "false") return { kind: "literal", value: t.v === "true" };
        if (t.v === "null") return { kind: "literal", value: null };
        if (this.isOp("(")) return { kind: "call", fn: t.v, args: this.parseArgs() };
        return { kind: "ident", name: t.v };
      case "string":
        return { kind: "literal", value: t.v };
      case "number":
        return { kind: "literal", value: t.v };
      case "op":
        if (t.v === "(") {
          const e = this.parseExpr();
          this.expect(")");
          return e;
        }
        if (t.v === "[" || t.v === "{") {
          const close = t.v === "[" ? "]" : "}";
          // Skipped, not parsed (a list or map is refused whatever it
          // holds); each level still nests an expression for the limit.
          let depth = 1;
          while (depth > 0) {
            const n = this.next();
            if (n.t === "eof") throw syntaxError(`mismatched input '<EOF>' expecting '${close}'`);
            if (n.t === "op" && (n.v === "[" || n.v === "{")) depth++;
            if (n.t === "op" && (n.v === "]" || n.v === "}")) depth--;
            if (this.depth + depth > MAX_SELECTOR_NESTING) throw recursionLimit();
          }
          return { kind: t.v === "[" ? "list" : "map" };
        }
        throw syntaxError(`extraneous input '${t.v}' expecting <EOF>`);
      case "eof":
        throw syntaxError(`mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}`);
    }
  }
}

const KIND_NAMES: Record<Node["kind"], string> = {
  ident: "IdentKind",
  select: "SelectKind",
  call: "CallKind",
  literal: "LiteralKind",
  list: "ListKind",
  map: "MapKind",
};

function fieldPath(n: Node): string {
  const fields: string[] = [];
  let at = n;
  while (at.kind === "select") {
    fields.unshift(at.field);
    at = at.operand;
  }
  if (at.kind === "ident") return [at.name, ...fields].join(".");
  throw new SelectorSyntaxError(
    `shardRange() first argument: expected field path (e.g. object.metadata.uid), got expression kind ${KIND_NAMES[at.kind]}`,
  );
}

function hexBound(n: Node, name: "hexStart" | "hexEnd"): bigint {
  if (n.kind !== "literal") {
    throw new SelectorSyntaxError(`${name} must be a string literal (e.g. '0xff'), got expression kind ${KIND_NAMES[n.kind]}`);
  }
  const s = n.value;
  if (typeof s !== "string") {
    throw new SelectorSyntaxError(`${name} must be a string literal, got ${typeof s === "number" ? (Number.isInteger(s) ? "int64" : "float64") : typeof s === "boolean" ? "bool" : "structpb.NullValue"}`);
  }
  if (!s.startsWith("0x")) throw new SelectorSyntaxError(`${name} must have '0x' prefix, got ${JSON.stringify(s)}`);
  const hex = s.slice(2);
  if (hex === "") throw new SelectorSyntaxError(`${name}: hex value is required after '0x'`);
  if (hex.length > 17) {
    throw new SelectorSyntaxError(`${name}: hex value too long (${hex.length} chars, max 17): ${JSON.stringify(hex)}`);
  }
  for (const c of hex) {
    if (!/[0-9a-f]/.test(c)) throw new SelectorSyntaxError(`${name}: invalid hex character ${JSON.stringify(c)} in ${JSON.stringify(s)}`);
  }
  if (hex.length === 17) {
    if (s !== "0x10000000000000000") {
      throw new SelectorSyntaxError(`${name}: 17-digit hex value must be '0x10000000000000000' (2^64), got ${JSON.stringify(s)}`);
    }
    return KEYSPACE_END;
  }
  if (hex.length !== 16) {
    const padded = "0x" + "0".repeat(16 - hex.length) + hex;
    throw new SelectorSyntaxError(`${name} must be a 0x-prefixed 16-digit hex value, got ${JSON.stringify(s)} (did you mean ${JSON.stringify(padded)}?)`);
  }
  return BigInt(s);
}

/** The `||` chain's operands, left to right; a loop, as a chain may be thousands long. */
function operands(root: Node): Node[] {
  const out: Node[] = [];
  const stack = [root];
  for (let n = stack.pop(); n !== undefined; n = stack.pop()) {
    if (n.kind === "call" && n.fn === "_||_") stack.push(...[...n.args].reverse());
    else out.push(n);
  }
  return out;
}

function walk(root: Node, out: Array<{ path: string; range: Range }>): void {
  for (const n of operands(root)) walkRange(n, out);
}

function walkRange(n: Node, out: Array<{ path: string; range: Range }>): void {
  if (n.kind !== "call") {
    throw new SelectorSyntaxError(`unexpected expression kind ${KIND_NAMES[n.kind]}; expected shardRange() call or || operator`);
  }
  if (n.fn !== "shardRange" || n.target !== undefined) {
    throw new SelectorSyntaxError(`unsupported function ${JSON.stringify(n.fn)}; only shardRange() and || are allowed`);
  }
  if (n.args.length !== 3) throw new SelectorSyntaxError(`shardRange() requires exactly 3 arguments, got ${n.args.length}`);
  const [p, a, b] = n.args as [Node, Node, Node];
  const path = fieldPath(p);
  if (path !== "object.metadata.uid" && path !== "object.metadata.namespace") {
    throw new SelectorSyntaxError(`unsupported field path ${JSON.stringify(path)}; supported: object.metadata.uid, object.metadata.namespace`);
  }
  const start = hexBound(a, "hexStart");
  const end = hexBound(b, "hexEnd");
  if (start >= end) {
    throw new SelectorSyntaxError(`shard range start ${formatBound(start)} must be less than end ${formatBound(end)}`);
  }
  out.push({ path, range: makeRange(start, end) });
}

/**
 * Parses a selector the way a 1.36 apiserver does. Throws
 * {@link SelectorSyntaxError} whose message is the server's detail text (the
 * server prefixes it with `invalid shard selector: `).
 *
 * The server treats an *absent or empty* parameter as "no selector"; that is
 * the caller's decision. A whitespace-only value reaches here and is refused.
 */
export function parseSelector(text: string): ShardSelector {
  const expr = text.trim();
  if (expr === "") throw new SelectorSyntaxError("empty shard selector is not allowed; omit the parameter for unfiltered lists");
  if ([...expr].length > MAX_SELECTOR_CODE_POINTS) {
    throw new SelectorSyntaxError(`CEL parse error: expression code point size exceeds limit: size: ${[...expr].length}, limit ${MAX_SELECTOR_CODE_POINTS}`);
  }
  const ast = new ExprParser(tokenize(expr)).parseAll();
  const reqs: Array<{ path: string; range: Range }> = [];
  walk(ast, reqs);
  const first = reqs[0] as { path: string };
  for (const r of reqs) {
    if (r.path !== first.path) {
      throw new SelectorSyntaxError(`all shard ranges must use the same field, got ${JSON.stringify(first.path)} and ${JSON.stringify(r.path)}`);
    }
  }
  return { key: keyOfPath(first.path as ShardKeyPath), ranges: reqs.map((r) => r.range) };
}
