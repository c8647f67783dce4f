import t from "tap";
import { formatSelector, parseSelector } from "../../src/shard/selector.ts";
import { SelectorSyntaxError } from "../../src/errors.ts";
import { fixtureNames, readFixtureText } from "../support/fixtures.ts";

function decodedSelector(requestText: string): string | undefined {
  const line = requestText.split("\n").find((l) => l.startsWith("# decoded query:"));
  const m = /[?&]shardSelector=(.*?)(?:&(?:watch|timeoutSeconds|limit|resourceVersion)=|$)/s.exec(line?.slice("# decoded query:".length).trim() ?? "");
  return m?.[1];
}

function rawSelector(requestText: string): string | null {
  const target = requestText.split("\n")[0]?.split(" ")[1] ?? "";
  return new URLSearchParams(target.split("?")[1] ?? "").get("shardSelector");
}

function responseBody(text: string): string {
  const i = text.indexOf("\n\n");
  return i === -1 ? "" : text.slice(i + 2);
}

const DIRS = ["minicore/gate-on/pods", "kube-apiserver/gate-on/pods", "apiextensions-apiserver/gate-on/widgets", "sample-apiserver/gate-on/flunders"];

t.test("every recorded invalid selector is refused with the server's exact message", async (t) => {
  let n = 0;
  for (const dir of DIRS) {
    for (const f of fixtureNames(dir).filter((f) => /^(pb-)?invalid-.*\.request\.txt$/.test(f))) {
      const req = readFixtureText(`${dir}/${f}`);
      const resp = readFixtureText(`${dir}/${f.replace(".request.txt", ".response.txt")}`);
      const value = rawSelector(req);
      if (value === null) continue;
      const status = Number(resp.split(" ")[1]);
      if (status === 200) {
        // Accepted (e.g. double quotes): the echo must equal our canonical form.
        const echo = (JSON.parse(responseBody(resp)) as { metadata?: { shardInfo?: { selector?: string } } }).metadata?.shardInfo?.selector;
        const sel = formatSelector(parseSelector(value));
        if (echo !== undefined) t.equal(sel, echo, `${dir}/${f} accepted and normalised like the server`);
        continue;
      }
      if (f.startsWith("pb-")) continue; // protobuf Status body; same message as the JSON twin
      const message = (JSON.parse(responseBody(resp)) as { message: string }).message;
      t.equal(status, 500, `${dir}/${f} is a 500`);
      const err = t.throws(() => parseSelector(value), SelectorSyntaxError);
      t.equal(`invalid shard selector: ${(err as Error).message}`, message, `${dir}/${f}`);
      n++;
    }
  }
  t.ok(n >= 30, `replayed ${n} invalid cases`);
});

t.test("every accepted selector in the transcripts echoes exactly as the server's shardInfo", async (t) => {
  let n = 0;
  for (const dir of DIRS) {
    for (const f of fixtureNames(dir).filter((f) => /^list-.*\.request\.txt$/.test(f))) {
      const req = readFixtureText(`${dir}/${f}`);
      const value = rawSelector(req);
      if (value === null || value === "") continue;
      const resp = readFixtureText(`${dir}/${f.replace(".request.txt", ".response.txt")}`);
      const body = JSON.parse(responseBody(resp)) as { metadata?: { shardInfo?: { selector?: string } } };
      const echo = body.metadata?.shardInfo?.selector;
      if (echo === undefined) continue;
      t.equal(formatSelector(parseSelector(value)), echo, `${dir}/${f}`);
      n++;
    }
  }
  t.ok(n >= 20, `compared ${n} echoes`);
  t.ok(decodedSelector("# decoded query: /x?shardSelector=a") === "a");
});

t.test("the parser accepts what CEL accepts: quotes, whitespace, comments, parentheses", async (t) => {
  const want = "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')";
  for (const v of [
    `shardRange(object.metadata.uid, "0x0000000000000000", "0x8000000000000000")`,
    `  shardRange(\n  object.metadata.uid ,'0x0000000000000000',\t'0x8000000000000000' )  `,
    `((shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')))`,
    `shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') // mine`,
    `shardRange(object . metadata . uid, r'0x0000000000000000', '''0x8000000000000000''')`,
  ]) {
    t.equal(formatSelector(parseSelector(v)), want, JSON.stringify(v));
  }
  const or = parseSelector("shardRange(object.metadata.uid, '0xc000000000000000', '0x10000000000000000') || shardRange(object.metadata.uid, '0x0000000000000000', '0x4000000000000000')");
  t.equal(or.ranges.length, 2, "unordered ranges are allowed and kept in order");
});

t.test("the parser refuses what the server refuses, naming the problem", async (t) => {
  const cases: Array<[string, RegExp]> = [
    ["shardRange(object.metadata.uid, '0X0000000000000000', '0x8000000000000000')", /hexStart must have '0x' prefix/],
    ["shardRange(object.metadata.uid, 0, '0x8000000000000000')", /hexStart must be a string literal, got int64/],
    ["shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000'), shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')", /mismatched input ','/],
    ["shardRange(object.metadata.uid, '0x00000000000000000', '0x8000000000000000')", /17-digit hex value must be/],
    ["shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') ||", /Syntax error/],
    ["shardRange('0x0', '0x0000000000000000', '0x8000000000000000')", /expected field path/],
    ["!shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')", /unsupported function "!_"/],
    ["object.metadata.uid", /unexpected expression kind SelectKind/],
    ["x".repeat(100_001), /code point size exceeds limit/],
  ];
  for (const [v, re] of cases) {
    const err = t.throws(() => parseSelector(v), SelectorSyntaxError, v.slice(0, 60));
    t.match((err as Error).message, re);
  }
});

// Measured against k8s.io/apiserver 1.36's sharding.Parse (cel-go, maxRecursionDepth 250).
const LOW = "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')";
const RECURSION = "CEL parse error: expression recursion limit exceeded: 250";

t.test("expressions nest as deeply as cel-go allows, and one level deeper is refused with its message", async (t) => {
  const rows: Array<[string, string, string]> = [
    ["parentheses", `${"(".repeat(248)}${LOW}${")".repeat(248)}`, `${"(".repeat(249)}${LOW}${")".repeat(249)}`],
    ["calls", `${"f(".repeat(249)}1${")".repeat(249)}`, `${"f(".repeat(250)}1${")".repeat(250)}`],
    ["lists", `${"[".repeat(249)}1${"]".repeat(249)}`, `${"[".repeat(250)}1${"]".repeat(250)}`],
    ["ternaries", `${"a ? b : ".repeat(249)}c`, `${"a ? b : ".repeat(250)}c`],
    ["indexes", `${"x[".repeat(249)}1${"]".repeat(249)}`, `${"x[".repeat(250)}1${"]".repeat(250)}`],
  ];
  for (const [what, deepest, tooDeep] of rows) {
    let message = "";
    try {
      parseSelector(deepest);
    } catch (e) {
      message = (e as Error).message;
    }
    t.not(message, RECURSION, `${what}: the deepest allowed nesting parses`);
    const err = t.throws(() => parseSelector(tooDeep), SelectorSyntaxError, `${what}: one level deeper`);
    t.equal((err as Error).message, RECURSION, `${what}: named as the server names it`);
  }
  t.equal(formatSelector(parseSelector(`${"(".repeat(248)}${LOW}${")".repeat(248)}`)), LOW);
});

t.test("no selector, however deep or long, overflows the parser's stack", async (t) => {
  const cases: Array<[string, string, RegExp]> = [
    ["14,000 open parentheses (a 16 KiB URL)", `${"(".repeat(14_000)}${LOW}`, /recursion limit exceeded/],
    ["a run of 90,000 !", `${"!".repeat(90_000)}x`, /unexpected expression kind IdentKind/],
    ["a run of 90,001 -", `${"-".repeat(90_001)}x`, /unsupported function "-_"/],
    ["an || chain of 33,000 operands", Array.from({ length: 33_000 }, () => "a").join("||"), /unexpected expression kind IdentKind/],
    ["a field path 40,000 selections long", `shardRange(${"a.".repeat(40_000)}b, '0x0000000000000000', '0x8000000000000000')`, /unsupported field path/],
  ];
  for (const [what, v, re] of cases) {
    const err = t.throws(() => parseSelector(v), SelectorSyntaxError, what);
    t.match((err as Error).message, re, what);
  }
  t.equal(parseSelector(Array.from({ length: 1000 }, () => LOW).join(" || ")).ranges.length, 1000, "a long valid chain keeps every range");
});
