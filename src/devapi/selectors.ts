/**
 * Label and field selectors, parsed the way k8s.io/apimachinery parses them
 * and matched against labels / field values. Pure; parse errors are the
 * 400 BadRequest a real server gives.
 */
import { badRequest } from "./status.ts";

export type LabelRequirement =
  | { readonly key: string; readonly op: "exists" | "!" }
  | { readonly key: string; readonly op: "=" | "!="; readonly value: string }
  | { readonly key: string; readonly op: "in" | "notin"; readonly values: readonly string[] }
  | { readonly key: string; readonly op: "gt" | "lt"; readonly value: number };

/** ANDed requirements; empty matches everything. */
export type LabelSelector = readonly LabelRequirement[];

const SPECIAL = new Set(["!", "=", ",", "(", ")", "<", ">", " ", "\t", "\n", "\r"]);

type Tok = { t: "id"; v: string } | { t: "op"; v: "!" | "=" | "==" | "!=" | "," | "(" | ")" | "<" | ">" } | { t: "end" };

function lex(text: string): Tok[] {
  const out: Tok[] = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i] as string;
    if (c === " " || c === "\t" || c === "\n" || c === "\r") {
      i++;
      continue;
    }
    const two = text.slice(i, i + 2);
    if (two === "==" || two === "!=") {
      out.push({ t: "op", v: two });
      i += 2;
      continue;
    }
    if (c === "!" || c === "=" || c === "," || c === "(" || c === ")" || c === "<" || c === ">") {
      out.push({ t: "op", v: c });
      i++;
      continue;
    }
    let j = i;
    while (j < text.length && !SPECIAL.has(text[j] as string)) j++;
    out.push({ t: "id", v: text.slice(i, j) });
    i = j;
  }
  out.push({ t: "end" });
  return out;
}

const NAME_RE = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const DNS_SUBDOMAIN_RE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

function checkKey(key: string): void {
  const slash = key.lastIndexOf("/");
  const prefix = slash >= 0 ? key.slice(0, slash) : undefined;
  const name = slash >= 0 ? key.slice(slash + 1) : key;
  if (prefix !== undefined && (prefix.length === 0 || prefix.length > 253 || !DNS_SUBDOMAIN_RE.test(prefix))) {
    throw badRequest(`unable to parse requirement: key: Invalid value: ${JSON.stringify(key)}: prefix part must be a lowercase RFC 1123 subdomain`);
  }
  if (name.length === 0 || name.length > 63 || !NAME_RE.test(name)) {
    throw badRequest(
      `unable to parse requirement: key: Invalid value: ${JSON.stringify(key)}: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character`,
    );
  }
}

function checkValue(key: string, value: string): void {
  if (value.length > 63 || (value !== "" && !NAME_RE.test(value))) {
    throw badRequest(
      `unable to parse requirement: values[0][${key}]: Invalid value: ${JSON.stringify(value)}: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character`,
    );
  }
}

/** Parses `labelSelector`. Throws a 400 {@link DevApiStatusError} on bad syntax. */
export function parseLabelSelector(text: string): LabelSelector {
  const toks = lex(text);
  let p = 0;
  const peek = (): Tok => toks[p] as Tok;
  const next = (): Tok => toks[p++] as Tok;
  const describe = (t: Tok): string => (t.t === "end" ? "EOS" : t.v);
  const out: LabelRequirement[] = [];
  if (peek().t === "end") return out;
  for (;;) {
    let t = next();
    if (t.t === "op" && t.v === "!") {
      const k = next();
      if (k.t !== "id") throw badRequest(`unable to parse requirement: found '${describe(k)}', expected: identifier`);
      checkKey(k.v);
      out.push({ key: k.v, op: "!" });
    } else if (t.t === "id") {
      const key = t.v;
      checkKey(key);
      t = peek();
      if (t.t === "end" || (t.t === "op" && t.v === ",")) {
        out.push({ key, op: "exists" });
      } else if (t.t === "op" && (t.v === "=" || t.v === "==" || t.v === "!=")) {
        next();
        const v = peek();
        let value = "";
        if (v.t === "id") {
          value = v.v;
          next();
        } else if (!(v.t === "end" || (v.t === "op" && v.v === ","))) {
          throw badRequest(`unable to parse requirement: found '${describe(v)}', expected: identifier`);
        }
        checkValue(key, value);
        out.push({ key, op: t.v === "!=" ? "!=" : "=", value });
      } else if (t.t === "op" && (t.v === "<" || t.v === ">")) {
        next();
        const v = next();
        if (v.t !== "id" || !/^-?\d+$/.test(v.v)) throw badRequest(`unable to parse requirement: for 'Gt', 'Lt' operators, the value must be an integer`);
        out.push({ key, op: t.v === ">" ? "gt" : "lt", value: Number(v.v) });
      } else if (t.t === "id" && (t.v === "in" || t.v === "notin")) {
        next();
        const open = next();
        if (!(open.t === "op" && open.v === "(")) throw badRequest(`unable to parse requirement: found '${describe(open)}', expected: '('`);
        const values: string[] = [];
        for (;;) {
          const v = next();
          if (v.t === "id") {
            checkValue(key, v.v);
            values.push(v.v);
            const sep = next();
            if (sep.t === "op" && sep.v === ")") break;
            if (!(sep.t === "op" && sep.v === ",")) throw badRequest(`unable to parse requirement: found '${describe(sep)}', expected: ',' or ')'`);
          } else if (v.t === "op" && v.v === ")" && values.length === 0) {
            throw badRequest(`unable to parse requirement: for 'in', 'notin' operators, values set can't be empty`);
          } else {
            throw badRequest(`unable to parse requirement: found '${describe(v)}', expected: identifier`);
          }
        }
        out.push({ key, op: t.v, values });
      } else {
        throw badRequest(`unable to parse requirement: found '${describe(t)}', expected: in, notin, =, ==, !=, gt, lt`);
      }
    } else {
      throw badRequest(`unable to parse requirement: found '${describe(t)}', expected: !, identifier, or 'end of string'`);
    }
    const sep = next();
    if (sep.t === "end") return out;
    if (!(sep.t === "op" && sep.v === ",")) throw badRequest(`found '${describe(sep)}', expected: ',' or 'end of string'`);
  }
}

/** True when `labels` satisfies every requirement. */
export function matchLabels(sel: LabelSelector, labels: Readonly<Record<string, string>>): boolean {
  for (const r of sel) {
    const has = Object.hasOwn(labels, r.key);
    const v = labels[r.key];
    switch (r.op) {
      case "exists":
        if (!has) return false;
        break;
      case "!":
        if (has) return false;
        break;
      case "=":
        if (!has || v !== r.value) return false;
        break;
      case "!=":
        if (has && v === r.value) return false;
        break;
      case "in":
        if (!has || !r.values.includes(v as string)) return false;
        break;
      case "notin":
        if (has && r.values.includes(v as string)) return false;
        break;
      case "gt":
      case "lt": {
        if (!has || !/^-?\d+$/.test(v as string)) return false;
        const n = Number(v);
        if (r.op === "gt" ? !(n > r.value) : !(n < r.value)) return false;
        break;
      }
    }
  }
  return true;
}

export interface FieldRequirement {
  readonly field: string;
  readonly op: "=" | "!=";
  readonly value: string;
}
export type FieldSelector = readonly FieldRequirement[];

function unescapeField(s: string): string {
  return s.replace(/\\(.)/g, "$1");
}

/** Splits on separators that are not backslash-escaped. */
function splitUnescaped(s: string, sep: string): string[] {
  const out: string[] = [];
  let cur = "";
  for (let i = 0; i < s.length; i++) {
    const c = s[i] as string;
    if (c === "\\" && i + 1 < s.length) {
      cur += c + (s[i + 1] as string);
      i++;
    } else if (c === sep) {
      out.push(cur);
      cur = "";
    } else {
      cur += c;
    }
  }
  out.push(cur);
  return out;
}

/**
 * Parses `fieldSelector` and checks each field against `supported`
 * (`field label not supported: X` otherwise, as the server says).
 */
export function parseFieldSelector(text: string, supported: (field: string) => boolean): FieldSelector {
  if (text.trim() === "") return [];
  const out: FieldRequirement[] = [];
  for (const part of splitUnescaped(text, ",")) {
    const m = /^([^=!]*?)(!=|==|=)(.*)$/s.exec(part);
    if (m === null) throw badRequest(`invalid selector: '${text}'; can't understand '${part}'`);
    const field = (m[1] as string).trim();
    if (!supported(field)) throw badRequest(`field label not supported: ${field}`);
    out.push({ field, op: m[2] === "!=" ? "!=" : "=", value: unescapeField(m[3] as string) });
  }
  return out;
}

export function matchFields(sel: FieldSelector, valueOf: (field: string) => string): boolean {
  for (const r of sel) {
    const v = valueOf(r.field);
    if (r.op === "=" ? v !== r.value : v === r.value) return false;
  }
  return true;
}

/** The value a selector pins `field` to, if it has an `=` requirement on it (the server narrows scope by it). */
export function requiredField(sel: FieldSelector, field: string): string | undefined {
  return sel.find((r) => r.field === field && r.op === "=")?.value;
}
