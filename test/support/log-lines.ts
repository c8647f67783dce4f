/**
 * Checks what shardcar's processes print: every line that is a JSON log
 * record must parse, and no object in it may repeat a key. JSON.parse
 * silently keeps the last of two equal keys, so it cannot see the problem
 * some log pipelines reject or mangle (pino prints a child logger's binding
 * again when a parent already bound the same key); this scan reads the text
 * itself. Lines that do not start with `{` are the CLI's human lines
 * ("shardcar proxy listening on …") and Node's own warnings, and are left be.
 */

/** The keys repeated within one object of the JSON `text`, as `path.key`; throws when `text` is not JSON. */
export function duplicateKeys(text: string): string[] {
  const found: string[] = [];
  let i = 0;
  const fail = (why: string): never => {
    throw new SyntaxError(`${why} at ${i} in ${text.slice(0, 200)}`);
  };
  const space = (): void => {
    while (i < text.length && " \t\r\n".includes(text[i] ?? "")) i++;
  };
  const string = (): string => {
    const start = i;
    i++; // the opening quote
    while (i < text.length && text[i] !== '"') i += text[i] === "\\" ? 2 : 1;
    if (i >= text.length) fail("unterminated string");
    i++;
    return JSON.parse(text.slice(start, i)) as string;
  };
  const value = (path: string): void => {
    space();
    const c = text[i];
    if (c === "{") {
      i++;
      const keys = new Set<string>();
      space();
      if (text[i] === "}") {
        i++;
        return;
      }
      for (;;) {
        space();
        if (text[i] !== '"') fail("expected a key");
        const key = string();
        if (keys.has(key)) found.push(path === "" ? key : `${path}.${key}`);
        keys.add(key);
        space();
        if (text[i] !== ":") fail("expected ':'");
        i++;
        value(path === "" ? key : `${path}.${key}`);
        space();
        if (text[i] === ",") i++;
        else if (text[i] === "}") {
          i++;
          return;
        } else fail("expected ',' or '}'");
      }
    }
    if (c === "[") {
      i++;
      space();
      if (text[i] === "]") {
        i++;
        return;
      }
      for (let n = 0; ; n++) {
        value(`${path}[${n}]`);
        space();
        if (text[i] === ",") i++;
        else if (text[i] === "]") {
          i++;
          return;
        } else fail("expected ',' or ']'");
      }
    }
    if (c === '"') {
      string();
      return;
    }
    const m = /^(?:true|false|null|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)/.exec(text.slice(i));
    if (m === null) fail("expected a value");
    i += m?.[0].length ?? 0;
  };
  value("");
  space();
  if (i !== text.length) fail("text after the value");
  return found;
}

/** Collects a process's output line by line and judges each JSON record as it completes. */
export class LogLines {
  #pending = "";
  #records = 0;
  readonly #problems: string[] = [];
  readonly #matching = new Map<string, { readonly re: RegExp; n: number }>();

  /** Counts the records whose text matches `re` from now on (to show what a run covered). */
  count(re: RegExp): void {
    this.#matching.set(re.source, { re, n: 0 });
  }

  add(chunk: string | Buffer): void {
    const lines = (this.#pending + chunk.toString()).split("\n");
    this.#pending = lines.pop() ?? "";
    for (const line of lines) this.#judge(line);
  }

  /** Judges the last line even without its newline (the process has exited). */
  end(): void {
    if (this.#pending !== "") this.#judge(this.#pending);
    this.#pending = "";
  }

  #judge(line: string): void {
    if (!line.startsWith("{")) return;
    this.#records++;
    for (const m of this.#matching.values()) if (m.re.test(line)) m.n++;
    try {
      const dup = duplicateKeys(line);
      if (dup.length > 0) this.#problems.push(`duplicate key ${dup.map((k) => JSON.stringify(k)).join(", ")}: ${line}`);
    } catch (e) {
      this.#problems.push(`not JSON (${e instanceof Error ? e.message : String(e)}): ${line}`);
    }
  }

  /** JSON records seen so far. */
  get records(): number {
    return this.#records;
  }

  /** How many records matched `re` (see {@link count}). */
  matched(re: RegExp): number {
    return this.#matching.get(re.source)?.n ?? 0;
  }

  /** Every bad record, with why. */
  problems(): readonly string[] {
    return this.#problems;
  }
}
