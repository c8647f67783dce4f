import t from "tap";
import { DevApiStatusError } from "../../src/devapi/index.ts";
import { matchFields, matchLabels, parseFieldSelector, parseLabelSelector } from "../../src/devapi/selectors.ts";

/** The Status a call throws, or undefined if it does not throw one. */
function statusOf(fn: () => unknown): { code: number; reason?: string; message: string } | undefined {
  try {
    fn();
  } catch (e) {
    if (e instanceof DevApiStatusError) return e.status;
    throw e;
  }
  return undefined;
}

const LABELS = { app: "web", tier: "front", "example.com/owner": "team-a", idx: "7" };

// [selector, matches LABELS?]
const MATCHING: Array<[string, boolean]> = [
  ["", true],
  ["app=web", true],
  ["app==web", true],
  ["app=api", false],
  ["app!=api", true],
  ["app!=web", false],
  ["missing!=x", true],
  ["app in (api,web)", true],
  ["app in (api, cache)", false],
  ["app notin (api,cache)", true],
  ["app notin (web)", false],
  ["missing notin (x)", true],
  ["missing in (x)", false],
  ["app", true],
  ["missing", false],
  ["!missing", true],
  ["!app", false],
  ["example.com/owner=team-a", true],
  ["app=web,tier=front", true],
  ["app=web,tier=back", false],
  [" app = web , !missing ", true],
  ["idx>5", true],
  ["idx<5", false],
  ["app>5", false],
  ["app=", false],
  ["missing=", false],
  // The match-nothing selector the proxy uses when a pod owns no range.
  ["shardcar.io/none,!shardcar.io/none", false],
];

t.test("label selectors match as the apiserver's do", async (t) => {
  for (const [sel, want] of MATCHING) t.equal(matchLabels(parseLabelSelector(sel), LABELS), want, JSON.stringify(sel));
});

t.test("a label with an empty value matches key= but not !key", async (t) => {
  t.equal(matchLabels(parseLabelSelector("a="), { a: "" }), true);
  t.equal(matchLabels(parseLabelSelector("!a"), { a: "" }), false);
  t.equal(matchLabels(parseLabelSelector("a"), { a: "" }), true);
});

const BAD = ["app in ()", "app in (a", "app in a", "=x", "app=web,", "app=a b", "-bad=x", "app=web)", "a/b/c=x", "app=x_", "idx>x", "app,,b"];

t.test("malformed label selectors are 400 BadRequest", async (t) => {
  for (const sel of BAD) {
    t.match(statusOf(() => parseLabelSelector(sel)), { code: 400, reason: "BadRequest" }, JSON.stringify(sel));
  }
});

t.test("field selectors: =, ==, != and escaped commas, on supported fields only", async (t) => {
  const supported = (f: string): boolean => f === "metadata.name" || f === "metadata.namespace";
  const values: Record<string, string> = { "metadata.name": "a,b", "metadata.namespace": "beta" };
  const get = (f: string): string => values[f] ?? "";
  t.equal(matchFields(parseFieldSelector("metadata.namespace=beta", supported), get), true);
  t.equal(matchFields(parseFieldSelector("metadata.namespace==beta", supported), get), true);
  t.equal(matchFields(parseFieldSelector("metadata.namespace!=beta", supported), get), false);
  t.equal(matchFields(parseFieldSelector("metadata.name=a\\,b,metadata.namespace=beta", supported), get), true);
  t.equal(matchFields(parseFieldSelector("", supported), get), true);
  t.match(statusOf(() => parseFieldSelector("spec.nodeName=x", supported)), { code: 400, message: "field label not supported: spec.nodeName" });
  t.match(statusOf(() => parseFieldSelector("metadata.name", supported)), { code: 400 });
});
