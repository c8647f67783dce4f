/**
 * The install docs' way to run your own build of the image works: the
 * kustomization docs/install.md shows (kustomize `images:` over an overlay),
 * rendered with the real `kubectl kustomize`, leaves no reference to the
 * unpublished default image anywhere, and sets the manager's container to
 * the new image with no flag or env that could carry another one. The
 * manager reads the sidecar image from that container (own-image.ts), so
 * injected pods get the same image.
 */
import t from "tap";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { loadAll } from "js-yaml";

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const KUBECTL = process.env["KUBECTL"] ?? "kubectl";
const DEFAULT_IMAGE = "ghcr.io/shardcar/shardcar";
const MARKER = "<!-- test/manifests/images.test.ts renders this kustomization -->";

interface Container {
  name: string;
  image: string;
  args?: string[];
  command?: string[];
  env?: Array<{ name: string; value?: string }>;
}
interface Obj {
  kind: string;
  metadata: { name: string };
  spec?: { template?: { spec?: { containers?: Container[]; initContainers?: Container[] } } };
}

/** The yaml block right after MARKER in docs/install.md. */
function documentedKustomization(): string {
  const doc = readFileSync(join(ROOT, "docs/install.md"), "utf8");
  const at = doc.indexOf(MARKER);
  if (at < 0) throw new Error(`docs/install.md has no ${MARKER}`);
  const block = /```yaml\n([\s\S]*?)```/.exec(doc.slice(at));
  if (block?.[1] === undefined) throw new Error("no ```yaml block after the marker in docs/install.md");
  return block[1];
}

/** Renders the documented kustomization with `<path-to-shardcar>` pointing at this checkout. */
async function renderDocumented(t: { teardown(fn: () => void): void }, text: string): Promise<{ objs: Obj[]; raw: string }> {
  const dir = mkdtempSync(join(tmpdir(), "shardcar-images-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  // kustomize refuses absolute resource paths; a relative one may leave the root.
  writeFileSync(join(dir, "kustomization.yaml"), text.replaceAll("<path-to-shardcar>", relative(dir, ROOT) || "."));
  const { stdout } = await run(KUBECTL, ["kustomize", dir], { maxBuffer: 16 * 1024 * 1024 });
  return { objs: (loadAll(stdout) as Obj[]).filter((o) => o !== null), raw: stdout };
}

t.test("the documented images: override replaces the shardcar image everywhere, for the manager and so for the sidecar", async (t) => {
  const text = documentedKustomization();
  const override = /newName:\s*(\S+)\s*\n\s*newTag:\s*(\S+)/.exec(text);
  t.ok(override, "the documented kustomization sets newName and newTag");
  const want = `${override?.[1]}:${override?.[2]}`;
  t.match(text, new RegExp(`- name: ${DEFAULT_IMAGE.replaceAll(".", "\\.")}\\n`), "it overrides the image the manifests name");

  const { objs, raw } = await renderDocumented(t, text);
  t.notOk(raw.includes(DEFAULT_IMAGE), `no ${DEFAULT_IMAGE} left anywhere in the rendered output (image, args, env, annotations)`);

  const manager = objs.find((o) => o.kind === "Deployment" && o.metadata.name === "shardcar-manager");
  const containers = manager?.spec?.template?.spec?.containers ?? [];
  const c = containers.find((x) => x.name === "manager");
  t.equal(c?.image, want, "the manager's 'manager' container, which the manager reads as the sidecar image, has the new image");
  const words = [...(c?.command ?? []), ...(c?.args ?? [])];
  t.notOk(words.some((w) => w === "--image" || w.startsWith("--image=")), "no --image flag that could name a different sidecar image");
  t.notOk((c?.env ?? []).some((e) => /image/i.test(e.name)), "no env var that could name a different sidecar image");

  // Every container kustomize rendered: ours carry the new image, the
  // example controller keeps its own.
  const all = objs.flatMap((o) => [...(o.spec?.template?.spec?.containers ?? []), ...(o.spec?.template?.spec?.initContainers ?? [])]);
  t.ok(all.length >= 2, "the overlay renders the manager and the example controller");
  for (const x of all) {
    if (x.image.startsWith(override?.[1] ?? "\0")) t.equal(x.image, want, `${x.name}: the new image with the new tag`);
    else t.notMatch(x.image, /shardcar/, `${x.name}: not a shardcar image (${x.image})`);
  }
});

t.test("without the override, the manifests name the image a release of this version publishes", async (t) => {
  // The release workflow refuses a tag other than v<package.json version>
  // (test/release/workflow.test.ts), so this is the tag it pushes.
  const version = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }).version;
  const { objs } = await renderDocumented(t, documentedKustomization().replace(/\nimages:[\s\S]*$/, "\n"));
  const manager = objs.find((o) => o.kind === "Deployment" && o.metadata.name === "shardcar-manager");
  t.equal(manager?.spec?.template?.spec?.containers?.find((x) => x.name === "manager")?.image, `${DEFAULT_IMAGE}:${version}`);
});
