/**
 * A resumable, validating JSON byte scanner that reports only what lies on a
 * few declared paths.
 *
 * The filters need three or four values per object (`metadata.uid`, the list's
 * `shardInfo.selector`, a watch event's `type`), not a parse tree. So the
 * scanner walks the bytes once with a small state machine (strings with every
 * escape, numbers, literals, nesting) and calls its {@link ScanSink} only for
 * values on a {@link PathNode} tree compiled from the caller's paths. Inside
 * anything off those paths it does no work beyond validating and counting
 * depth, and the caller can prune a subtree it has finished with
 * ({@link JsonScanner.untrackBelow}).
 *
 * Input arrives in chunks cut at arbitrary bytes: every piece of state lives
 * in fields, and a string of interest that straddles chunks is copied into a
 * bounded scratch buffer. Positions given to the sink are absolute stream
 * offsets (`base` + index in the chunk).
 */
import { ScanError } from "../../errors.ts";

/** Kinds of value, as reported by {@link ScanSink.enter}. */
export const KIND_OBJECT = 1;
export const KIND_ARRAY = 2;
export const KIND_STRING = 3;
export const KIND_NUMBER = 4;
export const KIND_TRUE = 5;
export const KIND_FALSE = 6;
export const KIND_NULL = 7;
export type ValueKind = 1 | 2 | 3 | 4 | 5 | 6 | 7;

/**
 * Receives the values on tracked paths. Every callback runs synchronously
 * inside {@link JsonScanner.scan}; a callback may call `untrackBelow` or
 * `stop` on the scanner, and may throw (the scan aborts with that error).
 */
export interface ScanSink {
  /** A value with a non-zero node id starts at absolute offset `pos`. */
  enter(id: number, pos: number, kind: ValueKind): void;
  /**
   * That value ends; `end` is the absolute offset just past its last byte.
   * Not called for strings: {@link string} carries their end.
   */
  leave(id: number, end: number): void;
  /**
   * A string value with a non-zero id: its raw bytes (between the quotes, still
   * escaped when `escaped`) are `buf[start, end)`, valid only during the call;
   * `after` is the absolute offset just past its closing quote.
   */
  string(id: number, buf: Buffer, start: number, end: number, escaped: boolean, after: number): void;
  /** A comma directly inside a container whose node asked for commas. */
  comma(id: number, pos: number): void;
  /** A newline between top-level values at `pos` (multi mode only): a watch event's line is complete. */
  lineEnd(pos: number): void;
}

/** What to track, as a nested literal; compiled once with {@link compilePaths}. */
export interface PathSpec {
  /** Non-zero: report enter/leave (and string content) for values at this path. */
  readonly id?: number;
  /** Object members to descend into, by exact (decoded) key. */
  readonly keys?: Readonly<Record<string, PathSpec>>;
  /** Every element of an array at this path. */
  readonly element?: PathSpec;
  /** Report the commas directly inside this container. */
  readonly commas?: boolean;
}

export interface PathNode {
  readonly id: number;
  readonly names: readonly string[];
  readonly keys: readonly Uint8Array[];
  readonly children: readonly PathNode[];
  readonly element: PathNode | null;
  readonly commas: boolean;
  /** Whether the scanner must look inside a container at this path. */
  readonly inside: boolean;
}

export function compilePaths(spec: PathSpec): PathNode {
  const names = Object.keys(spec.keys ?? {});
  const children = names.map((n) => compilePaths((spec.keys ?? {})[n] as PathSpec));
  const element = spec.element === undefined ? null : compilePaths(spec.element);
  const commas = spec.commas === true;
  return {
    id: spec.id ?? 0,
    names,
    keys: names.map((n) => Buffer.from(n, "utf8")),
    children,
    element,
    commas,
    inside: names.length > 0 || element !== null || commas,
  };
}

export interface ScannerOptions {
  /** Nesting limit; deeper input fails with `SHARDCAR_ERR_SCAN_DEPTH`. */
  readonly maxDepth: number;
  /** Largest tracked string that may straddle chunks (it is copied to scratch). */
  readonly maxTokenBytes: number;
  /** Accept a sequence of top-level values (a watch stream) instead of exactly one. */
  readonly multi: boolean;
}

/**
 * Go's encoding/json refuses nesting deeper than 10000, so the apiserver never
 * serves deeper JSON. Matching it means we never refuse what the server could
 * produce, while the depth stack stays bounded (one byte per level).
 */
export const DEFAULT_MAX_DEPTH = 10_000;

// ---------------------------------------------------------------------------
// The automaton. Outside strings every byte costs one table lookup:
// TABLE[state << 8 | byte] is either the next state (< 32, a pure transition)
// or an action (>= 32) that needs code: a value starts or a container closes
// (a tracked path may want a callback), a string runs (scanned in a tight
// loop), a number ends. Strings are 70–80% of a Kubernetes object's bytes, so
// they never go through the table. On compact pod lists this runs about twice
// as fast as the switch-per-state scanner it replaced (see bench/micro).

const S_VALUE = 0; // a value must follow (top level, after ':' or an array ',')
const S_FIRST_ELEM = 1; // after '[': a value or ']'
const S_FIRST_KEY = 2; // after '{': a key or '}'
const S_KEY = 3; // after ',' in an object: a key
const S_COLON = 4; // after a key
// After a value, by container. The depth stack holds these, so a close that
// does not match its opener has no transition: brackets match for free.
const S_AFTER_OBJ = 5;
const S_AFTER_ARR = 6;
const S_AFTER_ARR_COMMAS = 7; // an array whose node asked for its commas
const S_DONE = 8; // after the top-level value
// Number grammar (RFC 8259 §6).
const S_NUM_MINUS = 9;
const S_NUM_ZERO = 10;
const S_NUM_INT = 11;
const S_NUM_DOT = 12;
const S_NUM_FRAC = 13;
const S_NUM_EXP = 14;
const S_NUM_EXP_SIGN = 15;
const S_NUM_EXP_DIGITS = 16;
// Literal letters still expected: true = r u e, false = a l s e, null = u l l.
const S_LIT_TRUE = 17;
const S_LIT_FALSE = 20;
const S_LIT_NULL = 24;
/** Not in the table: a string that continues from the previous chunk. */
const S_STRING = 27;
const STATES = 28;

const A_ERROR = 32;
const A_OPEN_OBJ = 33;
const A_OPEN_ARR = 34;
const A_STRING = 35;
const A_KEY = 36;
const A_CLOSE_OBJ = 37;
const A_CLOSE_ARR = 38;
const A_NUMBER = 39;
const A_LITERAL = 40;
const A_NUMBER_END = 41; // the byte is not part of the number: end it, read the byte again
const A_LITERAL_END = 42; // the last letter of a literal
const A_COMMA = 43; // a comma the sink asked to see
const A_NEXT = 44; // a value after the top-level value: the next one (multi) or an error
const A_LINE_END = 45; // a newline after a top-level value (reported in multi mode)

const TABLE = new Uint8Array(STATES * 256).fill(A_ERROR);
{
  const set = (state: number, bytes: string, to: number): void => {
    for (const ch of bytes) TABLE[(state << 8) | ch.charCodeAt(0)] = to;
  };
  const WS = " \t\r\n";
  const DIGITS = "0123456789";
  for (const st of [S_VALUE, S_FIRST_ELEM, S_FIRST_KEY, S_KEY, S_COLON, S_AFTER_OBJ, S_AFTER_ARR, S_AFTER_ARR_COMMAS, S_DONE]) set(st, WS, st);
  for (const st of [S_VALUE, S_FIRST_ELEM]) {
    set(st, "{", A_OPEN_OBJ);
    set(st, "[", A_OPEN_ARR);
    set(st, '"', A_STRING);
    set(st, "-" + DIGITS, A_NUMBER);
    set(st, "tfn", A_LITERAL);
  }
  set(S_FIRST_ELEM, "]", A_CLOSE_ARR);
  set(S_FIRST_KEY, '"', A_KEY);
  set(S_FIRST_KEY, "}", A_CLOSE_OBJ);
  set(S_KEY, '"', A_KEY);
  set(S_COLON, ":", S_VALUE);
  set(S_AFTER_OBJ, ",", S_KEY);
  set(S_AFTER_OBJ, "}", A_CLOSE_OBJ);
  set(S_AFTER_ARR, ",", S_VALUE);
  set(S_AFTER_ARR, "]", A_CLOSE_ARR);
  set(S_AFTER_ARR_COMMAS, ",", A_COMMA);
  set(S_AFTER_ARR_COMMAS, "]", A_CLOSE_ARR);
  set(S_DONE, '{["-tfn' + DIGITS, A_NEXT);
  set(S_DONE, "\n", A_LINE_END);
  // Where a number may end, any byte it cannot take ends it; that byte is then
  // read again in the after-value state, which refuses `1a`, `01` or `1 2`.
  for (const st of [S_NUM_ZERO, S_NUM_INT, S_NUM_FRAC, S_NUM_EXP_DIGITS]) TABLE.fill(A_NUMBER_END, st << 8, (st + 1) << 8);
  set(S_NUM_MINUS, "0", S_NUM_ZERO);
  set(S_NUM_MINUS, "123456789", S_NUM_INT);
  set(S_NUM_ZERO, ".", S_NUM_DOT);
  set(S_NUM_ZERO, "eE", S_NUM_EXP);
  set(S_NUM_INT, DIGITS, S_NUM_INT);
  set(S_NUM_INT, ".", S_NUM_DOT);
  set(S_NUM_INT, "eE", S_NUM_EXP);
  set(S_NUM_DOT, DIGITS, S_NUM_FRAC);
  set(S_NUM_FRAC, DIGITS, S_NUM_FRAC);
  set(S_NUM_FRAC, "eE", S_NUM_EXP);
  set(S_NUM_EXP, "+-", S_NUM_EXP_SIGN);
  set(S_NUM_EXP, DIGITS, S_NUM_EXP_DIGITS);
  set(S_NUM_EXP_SIGN, DIGITS, S_NUM_EXP_DIGITS);
  set(S_NUM_EXP_DIGITS, DIGITS, S_NUM_EXP_DIGITS);
  set(S_LIT_TRUE, "r", S_LIT_TRUE + 1);
  set(S_LIT_TRUE + 1, "u", S_LIT_TRUE + 2);
  set(S_LIT_TRUE + 2, "e", A_LITERAL_END);
  set(S_LIT_FALSE, "a", S_LIT_FALSE + 1);
  set(S_LIT_FALSE + 1, "l", S_LIT_FALSE + 2);
  set(S_LIT_FALSE + 2, "s", S_LIT_FALSE + 3);
  set(S_LIT_FALSE + 3, "e", A_LITERAL_END);
  set(S_LIT_NULL, "u", S_LIT_NULL + 1);
  set(S_LIT_NULL + 1, "l", S_LIT_NULL + 2);
  set(S_LIT_NULL + 2, "l", A_LITERAL_END);
}

const QUOTE = 0x22;
const BSLASH = 0x5c;
const COLON = 0x3a;
const COMMA = 0x2c;

/** Characters allowed after a backslash; `u` is handled apart. */
const SIMPLE_ESCAPE = new Uint8Array(256);
for (const ch of '"\\/bfnrt') SIMPLE_ESCAPE[ch.charCodeAt(0)] = 1;

const HEX = new Uint8Array(256);
for (const ch of "0123456789abcdefABCDEF") HEX[ch.charCodeAt(0)] = 1;

function kindOf(c: number): ValueKind {
  if (c === 0x7b) return KIND_OBJECT;
  if (c === 0x5b) return KIND_ARRAY;
  if (c === QUOTE) return KIND_STRING;
  if (c === 0x74) return KIND_TRUE;
  if (c === 0x66) return KIND_FALSE;
  if (c === 0x6e) return KIND_NULL;
  return KIND_NUMBER;
}

function describeByte(b: number): string {
  return b >= 0x20 && b < 0x7f ? `'${String.fromCharCode(b)}'` : `0x${b.toString(16).padStart(2, "0")}`;
}

/**
 * Decodes the raw bytes of a JSON string (without its quotes). Without
 * escapes this is a plain UTF-8 decode; with them, `JSON.parse` of that one
 * string decodes them exactly as a JSON parser would (and throws on bad ones).
 */
export function decodeJsonString(buf: Buffer, start: number, end: number, escaped: boolean): string {
  const raw = buf.toString("utf8", start, end);
  return escaped ? (JSON.parse(`"${raw}"`) as string) : raw;
}

/**
 * One step of a JSON filter's engine inside its Transform's callback: what
 * the step returns is sent, what it throws (a ScanError) fails the stream,
 * so the proxy cuts the response rather than pass what it could not judge.
 */
export function runFilterStep(callback: (err?: Error | null) => void, step: () => Buffer[], send: (parts: Buffer[]) => void): void {
  let out: Buffer[];
  try {
    out = step();
  } catch (err) {
    callback(err as Error);
    return;
  }
  send(out);
  callback();
}

/**
 * Merges output pieces that are adjacent views of the same memory (a run of
 * kept input split by mode switches) into one view each, without copying, and
 * drops empty ones. What cannot be merged stays a separate piece.
 */
export function coalesce(parts: readonly Buffer[]): Buffer[] {
  const merged: Buffer[] = [];
  let first: Buffer | undefined; // the run being extended
  let runEnd = 0; // its end offset in first.buffer
  const close = (): void => {
    if (first === undefined) return;
    const len = runEnd - first.byteOffset;
    merged.push(len === first.length ? first : Buffer.from(first.buffer, first.byteOffset, len));
  };
  for (const p of parts) {
    if (p.length === 0) continue;
    if (first !== undefined && first.buffer === p.buffer && runEnd === p.byteOffset) {
      runEnd += p.length;
      continue;
    }
    close();
    first = p;
    runEnd = p.byteOffset + p.length;
  }
  close();
  return merged;
}

/** Whether `buf[start, end)` equals `want` byte for byte. */
export function bytesEqual(buf: Uint8Array, start: number, end: number, want: Uint8Array): boolean {
  const n = want.length;
  if (end - start !== n) return false;
  for (let k = 0; k < n; k++) if (buf[start + k] !== want[k]) return false;
  return true;
}

function lookup(node: PathNode, buf: Buffer, start: number, end: number, escaped: boolean): PathNode | null {
  if (escaped) {
    // Keys with escapes are legal (the apiserver never writes them): compare decoded.
    const k = node.names.indexOf(decodeJsonString(buf, start, end, true));
    return k < 0 ? null : (node.children[k] as PathNode);
  }
  const keys = node.keys;
  for (let k = 0; k < keys.length; k++) {
    if (bytesEqual(buf, start, end, keys[k] as Uint8Array)) return node.children[k] as PathNode;
  }
  return null;
}

type ScanCode = "SHARDCAR_ERR_SCAN_SYNTAX" | "SHARDCAR_ERR_SCAN_DEPTH" | "SHARDCAR_ERR_SCAN_ITEM_TOO_LARGE";

/**
 * The scanner: one instance per body or stream. Methods never block. `scan`
 * throws {@link ScanError} on malformed input (or rethrows what a sink threw),
 * after which the instance must be discarded.
 */
export class JsonScanner {
  private readonly root: PathNode;
  private readonly sink: ScanSink;
  private readonly maxDepth: number;
  private readonly maxTokenBytes: number;
  private readonly multi: boolean;

  /** The after-value state of the container at each depth; `stack[0]` is S_DONE. Grows on demand up to maxDepth. */
  private stack: Uint8Array;
  /** Node of the tracked container at each depth `<= td`. */
  private readonly trackNode: Array<PathNode | null>;
  /** Node of the current member or element of the container at each depth `<= td`. */
  private readonly cur: Array<PathNode | null>;

  private state: number;
  private depth = 0;
  /** Deepest depth whose container is tracked; always `<= depth`. */
  private td = 0;
  private stopped = false;

  // The string in progress (only while it straddles chunks, or is captured).
  private strKey = false;
  private strCapture = false;
  private strEscaped = false;
  private strId = 0;
  /** 0: none; 1: after a backslash; 2..5: hex digits of a \uXXXX still expected, plus one. */
  private esc = 0;
  private scratch: Buffer = Buffer.alloc(256);
  private spill = 0;
  private keyStartPos = -1;
  private pendingKeyStart = -1;

  /** Node id of the number or literal in progress (0: untracked). */
  private scalarId = 0;

  constructor(root: PathNode, sink: ScanSink, opts: ScannerOptions) {
    this.root = root;
    this.sink = sink;
    this.maxDepth = opts.maxDepth;
    this.maxTokenBytes = opts.maxTokenBytes;
    this.multi = opts.multi;
    // Never longer than maxDepth + 1, so one length check also enforces the limit.
    this.stack = new Uint8Array(Math.min(64, opts.maxDepth + 1));
    this.stack[0] = S_DONE;
    this.trackNode = [root];
    this.cur = [root];
    this.state = opts.multi ? S_DONE : S_VALUE;
  }

  /** True when the input so far is exactly one complete value (multi: a whole number of values). */
  get complete(): boolean {
    return this.state === S_DONE;
  }

  /** Current nesting depth (0 outside the top-level value). */
  get currentDepth(): number {
    return this.depth;
  }

  /** Absolute offset of the opening quote of the last tracked key read. */
  get lastKeyStart(): number {
    return this.keyStartPos;
  }

  /**
   * Stops reporting anything nested deeper than `depth` until the scan climbs
   * back out; the value that contains the current position at `depth` still
   * gets its `leave`.
   */
  untrackBelow(depth: number): void {
    if (depth < this.td) this.td = depth;
  }

  /** Ends scanning for good: `scan` returns right after the current callback. */
  stop(): void {
    this.stopped = true;
  }

  private fail(code: ScanCode, message: string, offset: number): ScanError {
    return new ScanError(code, message, { offset, depth: this.depth });
  }

  private spillBytes(buf: Buffer, start: number, end: number, base: number): void {
    const need = this.spill + (end - start);
    if (need > this.maxTokenBytes) {
      throw this.fail("SHARDCAR_ERR_SCAN_ITEM_TOO_LARGE", `a tracked string exceeds ${this.maxTokenBytes} bytes`, base + end);
    }
    if (need > this.scratch.length) {
      const grown = Buffer.alloc(Math.min(Math.max(need, this.scratch.length * 2), this.maxTokenBytes));
      grown.set(this.scratch.subarray(0, this.spill));
      this.scratch = grown;
    }
    this.scratch.set(buf.subarray(start, end), this.spill);
    this.spill = need;
  }

  /**
   * Consumes an escape sequence from `j` (just after the backslash, or in the
   * middle of one when resuming). Returns the index after it; if the chunk
   * ends first, returns `len` with `this.esc` still set.
   */
  private escape(buf: Uint8Array, j: number, len: number, base: number): number {
    while (j < len) {
      const b = buf[j] as number;
      if (this.esc === 1) {
        if (b === 0x75) this.esc = 5;
        else if (SIMPLE_ESCAPE[b] === 1) {
          this.esc = 0;
          return j + 1;
        } else throw this.fail("SHARDCAR_ERR_SCAN_SYNTAX", `invalid escape \\${String.fromCharCode(b)}`, base + j);
      } else {
        if (HEX[b] !== 1) throw this.fail("SHARDCAR_ERR_SCAN_SYNTAX", `invalid \\u escape digit ${describeByte(b)}`, base + j);
        if (--this.esc === 1) {
          this.esc = 0;
          return j + 1;
        }
      }
      j++;
    }
    return len;
  }

  /**
   * Scans string content from `i` to its closing quote. Returns the index of
   * the closing quote, or `len` if the chunk ends first (escape state saved).
   */
  private stringEnd(buf: Uint8Array, i: number, len: number, base: number): number {
    if (this.esc !== 0) {
      i = this.escape(buf, i, len, base);
      if (this.esc !== 0) return len;
    }
    for (;;) {
      let b = 0;
      // Plain comparisons beat a lookup table here (measured: ~870 vs ~610 MB/s).
      while (i < len && (b = buf[i] as number) !== QUOTE && b !== BSLASH && b >= 0x20) i++;
      if (i >= len) return len;
      if (b === QUOTE) return i;
      if (b !== BSLASH) throw this.fail("SHARDCAR_ERR_SCAN_SYNTAX", `control character ${describeByte(b)} in a string`, base + i);
      this.strEscaped = true;
      this.esc = 1;
      i = this.escape(buf, i + 1, len, base);
      if (this.esc !== 0) return len;
    }
  }

  /**
   * Delivers a captured string that closed at `buf[q]` (content starts at
   * `from`, or in scratch if it straddled chunks). Returns nothing; callers
   * reload `td` and check `stopped` afterwards.
   */
  private deliverString(buf: Buffer, from: number, q: number, base: number): void {
    let sbuf = buf;
    let ss = from;
    let se = q;
    if (this.spill > 0) {
      this.spillBytes(buf, from, q, base);
      sbuf = this.scratch;
      ss = 0;
      se = this.spill;
    }
    this.spill = 0;
    const depth = this.depth;
    if (this.strKey) {
      this.cur[depth] = lookup(this.trackNode[depth] as PathNode, sbuf, ss, se, this.strEscaped);
      this.keyStartPos = this.pendingKeyStart;
      return;
    }
    this.sink.string(this.strId, sbuf, ss, se, this.strEscaped, base + q + 1);
  }

  private growStack(): Uint8Array {
    const grown = new Uint8Array(Math.min(this.stack.length * 4, this.maxDepth + 1));
    grown.set(this.stack);
    this.stack = grown;
    return grown;
  }

  /** The state after a value closes inside the container at `depth`. */
  private after(depth: number): number {
    return this.stack[depth] as number;
  }

  /**
   * Scans `buf`, whose first byte is at absolute offset `base`. Returns the
   * index just past the last byte consumed: `buf.length`, or less if a
   * callback called {@link stop}.
   */
  scan(buf: Buffer, base: number): number {
    const len = buf.length;
    if (this.stopped) return 0;
    let i = 0;
    if (this.state === S_STRING) {
      // A string straddles the chunk boundary: finish it outside the hot loop.
      const q = this.stringEnd(buf, 0, len, base);
      if (q >= len) {
        if (this.strCapture) this.spillBytes(buf, 0, len, base);
        return len;
      }
      i = q + 1;
      this.state = this.strKey ? S_COLON : this.after(this.depth);
      if (this.strCapture) {
        this.deliverString(buf, 0, q, base);
        if (this.stopped) return i;
      }
    }

    // The loop keeps its state in locals. Around every sink callback they are
    // written back to the fields (the sink may call untrackBelow or stop,
    // which read and change them) and `td` is read again after: the same few
    // lines at each callback, written out per byte-loop case, not shared
    // through a call that would have to take the locals and hand `td` back.
    let stack = this.stack;
    const sink = this.sink;
    let state = this.state;
    let depth = this.depth;
    let td = this.td;

    outer: while (i < len) {
      const c = buf[i] as number;
      const code = TABLE[(state << 8) | c] as number;
      if (code < 32) {
        state = code;
        i++;
        continue;
      }
      switch (code) {
        case A_KEY: {
          if (depth !== td) {
            // Untracked object: run `"key":"value",` members in one tight loop,
            // the bulk of every object once its key has been read. Anything
            // else (an escape, whitespace, a non-string value, the chunk's end)
            // leaves the loop at a token boundary for the general path.
            for (;;) {
              let j = i + 1;
              let b = 0;
              while (j < len && (b = buf[j] as number) !== QUOTE && b !== BSLASH && b >= 0x20) j++;
              if (j >= len || b !== QUOTE) break; // general path from the key's quote
              if (buf[j + 1] !== COLON) {
                i = j + 1;
                state = S_COLON;
                continue outer;
              }
              const v = j + 2;
              let k: number;
              if (buf[v] === QUOTE) {
                k = v + 1;
                while (k < len && (b = buf[k] as number) !== QUOTE && b !== BSLASH && b >= 0x20) k++;
                if (k >= len || b !== QUOTE) {
                  i = v; // general path from the value's quote
                  state = S_VALUE;
                  continue outer;
                }
              } else if (buf[v] === 0x7b && buf[v + 1] === 0x7d && depth < this.maxDepth) {
                k = v + 1; // `{}`: managedFields are full of them
              } else {
                i = v;
                state = S_VALUE;
                continue outer;
              }
              if (buf[k + 1] === COMMA && buf[k + 2] === QUOTE) {
                i = k + 2; // the next member's key
                continue;
              }
              i = k + 1;
              state = S_AFTER_OBJ;
              continue outer;
            }
          }
          let capture = false;
          if (depth === td) {
            capture = (this.trackNode[depth] as PathNode).keys.length > 0;
            if (!capture) this.cur[depth] = null;
            this.pendingKeyStart = base + i;
          }
          // Performance twin of the string value in this function's A_STRING
          // case below: the same steps for a key, written out in the per-byte
          // scan loop rather than shared through a call, as every state of
          // this loop is. Change both.
          i++;
          this.strEscaped = false;
          const q = this.stringEnd(buf, i, len, base);
          if (q >= len) {
            this.strKey = true;
            this.strCapture = capture;
            this.spill = 0;
            if (capture) this.spillBytes(buf, i, len, base);
            this.depth = depth;
            this.td = td;
            this.state = S_STRING;
            return len;
          }
          if (capture) {
            this.strKey = true;
            this.depth = depth;
            this.deliverString(buf, i, q, base);
          }
          i = q + 1;
          // Fused: `"key":` is nearly always followed directly by the colon.
          if (buf[i] !== COLON) {
            state = S_COLON;
            continue;
          }
          i++;
          state = S_VALUE;
          // Fused: an off-path string value in a tracked object (a metadata
          // name, say) is skipped right here, with the comma after it.
          if (depth === td && this.cur[depth] === null && buf[i] === QUOTE) {
            let k = i + 1;
            let b = 0;
            while (k < len && (b = buf[k] as number) !== QUOTE && b !== BSLASH && b >= 0x20) k++;
            if (k < len && b === QUOTE) {
              i = k + 1;
              state = S_AFTER_OBJ;
              if (buf[i] === COMMA) {
                i++;
                state = S_KEY;
              }
            }
          }
          continue;
        }

        case A_STRING:
        case A_OPEN_OBJ:
        case A_OPEN_ARR:
        case A_NUMBER:
        case A_LITERAL:
        case A_NEXT: {
          if (code === A_NEXT && !this.multi) {
            throw this.fail("SHARDCAR_ERR_SCAN_SYNTAX", `unexpected ${describeByte(c)} after the end of the document`, base + i);
          }
          // A value starts at i. Find its node if its container is tracked.
          let node: PathNode | null = null;
          if (depth === td) {
            if (depth === 0) node = this.root;
            else if (stack[depth] === S_AFTER_OBJ) node = this.cur[depth] ?? null;
            else node = (this.trackNode[depth] as PathNode).element;
            this.cur[depth] = node;
            if (node !== null && node.id !== 0) {
              this.depth = depth;
              this.td = td;
              this.state = state;
              sink.enter(node.id, base + i, kindOf(c));
              td = this.td;
              if (this.stopped) return i;
              if (depth !== td) node = null; // the sink pruned this value
            }
          }
          if (c === QUOTE) {
            // Performance twin of the key string in this function's A_KEY case
            // above: written out in the per-byte scan loop, not shared through
            // a call. Change both.
            i++;
            this.strEscaped = false;
            const capture = node !== null && node.id !== 0;
            const q = this.stringEnd(buf, i, len, base);
            if (q >= len) {
              this.strKey = false;
              this.strCapture = capture;
              this.strId = node === null ? 0 : node.id;
              this.spill = 0;
              if (capture) this.spillBytes(buf, i, len, base);
              this.depth = depth;
              this.td = td;
              this.state = S_STRING;
              return len;
            }
            if (capture) {
              this.strKey = false;
              this.strId = (node as PathNode).id;
              this.depth = depth;
              this.td = td;
              this.deliverString(buf, i, q, base);
              td = this.td;
              if (this.stopped) return q + 1;
            }
            i = q + 1;
            state = stack[depth] as number;
            // Fused: in an object a string value is nearly always followed by a comma.
            if (state === S_AFTER_OBJ && buf[i] === COMMA) {
              i++;
              state = S_KEY;
            }
            continue;
          }
          i++;
          if (c === 0x7b || c === 0x5b) {
            if (++depth >= stack.length) {
              if (depth > this.maxDepth) throw this.fail("SHARDCAR_ERR_SCAN_DEPTH", `nesting deeper than ${this.maxDepth}`, base + i - 1);
              stack = this.growStack();
            }
            if (c === 0x7b) {
              stack[depth] = S_AFTER_OBJ;
              state = S_FIRST_KEY;
            } else {
              stack[depth] = node !== null && node.commas ? S_AFTER_ARR_COMMAS : S_AFTER_ARR;
              state = S_FIRST_ELEM;
            }
            if (node !== null && node.inside) {
              td = depth;
              this.trackNode[depth] = node;
              this.cur[depth] = null;
            }
            continue;
          }
          this.scalarId = node === null ? 0 : node.id;
          if (c === 0x74) state = S_LIT_TRUE;
          else if (c === 0x66) state = S_LIT_FALSE;
          else if (c === 0x6e) state = S_LIT_NULL;
          else state = c === 0x2d ? S_NUM_MINUS : c === 0x30 ? S_NUM_ZERO : S_NUM_INT;
          continue;
        }

        case A_CLOSE_OBJ:
        case A_CLOSE_ARR: {
          i++;
          depth--;
          if (depth < td) td = depth;
          state = stack[depth] as number;
          if (depth === td) {
            const node = this.cur[depth];
            if (node !== null && node !== undefined && node.id !== 0) {
              // Performance twin of the scalar's end just below (A_NUMBER_END):
              // the callback bracket described where scan()'s loop begins. Change both.
              this.depth = depth;
              this.td = td;
              this.state = state;
              sink.leave(node.id, base + i);
              td = this.td;
              if (this.stopped) return i;
            }
          }
          continue;
        }

        case A_NUMBER_END:
        case A_LITERAL_END: {
          // A number ends before c (c is read again); a literal ends with c.
          if (code === A_LITERAL_END) i++;
          state = stack[depth] as number;
          if (this.scalarId !== 0) {
            // Performance twin of a container's end just above (A_CLOSE_OBJ):
            // the callback bracket described where scan()'s loop begins. Change both.
            this.depth = depth;
            this.td = td;
            this.state = state;
            sink.leave(this.scalarId, base + i);
            td = this.td;
            if (this.stopped) return i;
          }
          continue;
        }

        case A_COMMA: {
          state = S_VALUE;
          i++;
          if (depth === td) {
            this.depth = depth;
            this.td = td;
            this.state = state;
            sink.comma((this.trackNode[depth] as PathNode).id, base + i - 1);
            td = this.td;
            if (this.stopped) return i;
          }
          continue;
        }

        case A_LINE_END: {
          i++;
          if (this.multi) {
            this.depth = depth;
            this.td = td;
            this.state = state;
            sink.lineEnd(base + i - 1);
            td = this.td;
            if (this.stopped) return i;
          }
          continue;
        }

        default:
          this.depth = depth;
          throw this.fail("SHARDCAR_ERR_SCAN_SYNTAX", describeError(state, c), base + i);
      }
    }
    this.state = state;
    this.depth = depth;
    this.td = td;
    return i;
  }
}

function describeError(state: number, c: number): string {
  const got = describeByte(c);
  switch (state) {
    case S_FIRST_KEY:
    case S_KEY:
      return `expected a key, got ${got}`;
    case S_COLON:
      return `expected ':', got ${got}`;
    case S_AFTER_OBJ:
    case S_AFTER_ARR:
    case S_AFTER_ARR_COMMAS:
      return `expected ',' or a matching close, got ${got}`;
    case S_DONE:
      return `unexpected ${got} after the end of the document`;
    case S_VALUE:
    case S_FIRST_ELEM:
      return `expected a value, got ${got}`;
    default:
      return state >= S_LIT_TRUE ? `malformed literal at ${got}` : `malformed number at ${got}`;
  }
}
