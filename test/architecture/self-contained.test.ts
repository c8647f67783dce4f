/**
 * Issue 34 §1: `npm test` needs nothing beside the clone. No code the suite
 * runs or ships (src/, and test/ outside the real-server, image and soak
 * lanes) may name the shared folder that sits at `../shared` in development:
 * `../shared`, `shared/fixtures`, `"shared"`, `SHARDCAR_SHARED` and the like.
 * The recorded inputs are in the repository (test/fixtures/, read through
 * test/support/fixtures.ts).
 *
 * One part of that folder stays outside on purpose: the realapi kit
 * (`../shared/realapi`), a real apiserver the real-server lane builds. The
 * files in KIT_USERS are loaded by the suite yet may name the kit (a test
 * that uses it skips, with the reason, when it is not built); they may name
 * nothing else there, and an entry that no longer names it must go.
 */
import t from "tap";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";

const ROOT = resolve(import.meta.dirname, "../..");

/** Left out: the lanes `npm test` does not run (package.json "tap.exclude"), and the recordings. */
const OUT_OF_SCOPE = ["test/real/", "test/image/", "test/soak/", "test/fixtures/kube-apiserver/"];

/** Files that may name the shared folder at all, and why. */
const EXEMPT: Readonly<Record<string, string>> = {
  "test/fixtures/refresh.sh": "copies the recordings in from the shared folder; run by hand, never by the suite",
  "test/architecture/self-contained.test.ts": "this guard: it names the folder to look for it",
};

/** Files the suite loads that may name the realapi kit (and nothing else in the shared folder), and why. */
const KIT_USERS: Readonly<Record<string, string>> = {
  "test/manifests/crd.test.ts": "runs the ShardRing CRD against the kit; skips, with the reason, when it is not built",
  "test/support/faults/servers.ts": "realapiKit(): where the real lane's fault servers start the kit",
  "test/support/go-build.ts": "the Go toolchain the kit's setup.sh unpacks; the real lane's client-go controller only",
  "test/support/service-account-admission.ts": "says what the kit lacks; used by the real lane only",
  "test/support/repeat.ts": "clones beside the checkout so that the kit resolves as it does here",
};

const CODE = /\.(?:ts|mts|cts|js|mjs|cjs|sh|go)$/;

/** Ways code names the shared folder: a relative path, a path inside it, the bare name as a string, its variable. */
const SHARED = /(?:\.\.[\\/])+shared\b|(?<![\w-])shared[\\/](?:fixtures|docs|realapi|tools|hooks)\b|["'`]shared["'`/]|\bSHARDCAR_SHARED\b|\/work\/shared\b/g;

interface Finding {
  readonly file: string;
  readonly line: number;
  readonly text: string;
  /** The line is about the realapi kit. */
  readonly kit: boolean;
}

/** Every line of `text` that names the shared folder. */
function findings(file: string, text: string): Finding[] {
  return text.split("\n").flatMap((line, i) => (line.match(SHARED) === null ? [] : [{ file, line: i + 1, text: line.trim(), kit: /realapi/.test(line) }]));
}

/** The findings that break the rule: anything outside EXEMPT, except kit lines in KIT_USERS. */
function violations(all: readonly Finding[]): Finding[] {
  return all.filter((f) => EXEMPT[f.file] === undefined && !(f.kit && KIT_USERS[f.file] !== undefined));
}

function codeFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    const rel = relative(ROOT, p).split("\\").join("/");
    if (e.isDirectory()) return OUT_OF_SCOPE.includes(`${rel}/`) ? [] : codeFiles(p);
    return CODE.test(e.name) ? [rel] : [];
  });
}

const scanned = [...codeFiles(join(ROOT, "src")), ...codeFiles(join(ROOT, "test"))].sort();
const found = scanned.flatMap((file) => findings(file, readFileSync(join(ROOT, file), "utf8")));

t.test("no code the suite runs or ships names the shared folder beside the clone", async (t) => {
  t.ok(scanned.length > 100, `scanned ${scanned.length} files of src/ and test/`);
  t.same(
    violations(found).map((f) => `${f.file}:${f.line}: ${f.text}`),
    [],
    "read inputs from test/fixtures/ (test/support/fixtures.ts), not from ../shared",
  );
});

t.test("every exception still needs its place on the list", async (t) => {
  for (const file of [...Object.keys(EXEMPT), ...Object.keys(KIT_USERS)]) {
    t.ok(scanned.includes(file), `${file} exists and is scanned`);
    t.ok(found.some((f) => f.file === file && (EXEMPT[file] !== undefined || f.kit)), `${file} still names the ${EXEMPT[file] === undefined ? "kit" : "shared folder"}`);
  }
});

t.test("the guard can fail: each way of naming the shared folder is caught", async (t) => {
  const planted = [
    'const ROOT = fileURLToPath(new URL("../../../shared/fixtures/kube-apiserver/", import.meta.url));',
    'readFileSync(join(ROOT, "..", "shared", "docs", "kep-5866.md"));',
    "const dir = process.env.SHARDCAR_SHARED ?? here;",
    "// the transcripts in shared/fixtures/kube-apiserver/",
    "cat /work/shared/docs/kep-5866.md",
  ];
  for (const line of planted) t.equal(violations(findings("test/x.test.ts", line)).length, 1, line);
  t.equal(violations(findings("test/x.test.ts", 'const KIT = "../shared/realapi";')).length, 1, "the kit, named in a file not on KIT_USERS");
  t.equal(violations(findings("test/manifests/crd.test.ts", 'const F = "../shared/fixtures/kube-apiserver";')).length, 1, "the fixtures, named in a kit user");
  t.equal(violations(findings("test/manifests/crd.test.ts", 'const KIT = "../../../shared/realapi/";')).length, 0, "the kit, in a kit user");
  for (const ok of ["const shared = join(root, SA_PATH);", "a lock shared by the replicas", "sharedDir: f.shared,", "shared-informer"]) {
    t.same(findings("test/x.test.ts", ok), [], `not a reference: ${ok}`);
  }
});
