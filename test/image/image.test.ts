/**
 * The built image meets its runtime contract (Dockerfile header,
 * docs/install.md): it runs as 65532, its commands run on a read-only root
 * filesystem with no capabilities, and it holds only what runs: no dev
 * dependencies, no compilers or build tools, no package manager, no shell, no
 * npm cache. And it stays within its size budget.
 *
 * Run by test/image/run.sh (npm run test:image), which builds the image and
 * sets SHARDCAR_IMAGE; skipped without it. The filesystem checks read the
 * image itself (`podman image mount`), not the Dockerfile.
 */
import t from "tap";
import { openSync, readSync, closeSync, readFileSync, readdirSync, lstatSync, existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, basename } from "node:path";
import { fileURLToPath } from "node:url";
import { IMAGE, RESTRICTED, podman, runImage } from "./support.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
/** Uncompressed size budget (podman's "SIZE"). Measured 180 MB with Node 24.21; docs/install.md. */
const SIZE_BUDGET_BYTES = 200_000_000;

if (IMAGE === undefined) {
  t.comment("SHARDCAR_IMAGE is not set: run `npm run test:image`, which builds the image first");
  t.pass("skipped: no image under test", { skip: "SHARDCAR_IMAGE is not set (npm run test:image builds the image)" });
} else {
  const image = IMAGE;

  interface Entry {
    path: string; // absolute inside the image
    kind: "file" | "dir" | "link";
    elf: boolean;
  }

  /** Every entry of the image's filesystem, mounted read-only by podman. */
  const walk = (mount: string): Entry[] => {
    const out: Entry[] = [];
    const visit = (rel: string): void => {
      for (const name of readdirSync(join(mount, rel))) {
        const path = `${rel}/${name}`;
        const st = lstatSync(join(mount, path));
        if (st.isSymbolicLink()) out.push({ path, kind: "link", elf: false });
        else if (st.isDirectory()) {
          out.push({ path, kind: "dir", elf: false });
          visit(path);
        } else {
          let elf = false;
          if (st.size >= 4) {
            const fd = openSync(join(mount, path), "r");
            const head = Buffer.alloc(4);
            readSync(fd, head, 0, 4, 0);
            closeSync(fd);
            elf = head.equals(Buffer.from([0x7f, 0x45, 0x4c, 0x46]));
          }
          out.push({ path, kind: "file", elf });
        }
      }
    };
    visit("");
    return out;
  };

  const mounted = await podman(["image", "mount", image]);
  if (mounted.code !== 0) throw new Error(`podman image mount ${image} failed: ${mounted.stderr}`);
  const mount = mounted.stdout.trim();
  t.teardown(async () => {
    await podman(["image", "unmount", image]);
  });
  const entries = walk(mount);
  const paths = new Set(entries.map((e) => e.path));

  t.test("the image runs as UID and GID 65532, numerically", async (t) => {
    const inspect = await podman(["image", "inspect", image, "--format", "{{.Config.User}}"]);
    t.equal(inspect.stdout.trim(), "65532:65532", "USER is numeric, so Kubernetes can verify runAsNonRoot");
    const ids = await runImage(image, ["--network=none", ...RESTRICTED, "--entrypoint", "/usr/local/bin/node"], [
      "-e",
      "console.log(JSON.stringify({ uid: process.getuid(), gid: process.getgid(), groups: process.getgroups() }))",
    ]);
    t.equal(ids.code, 0, ids.stderr);
    t.same(JSON.parse(ids.stdout), { uid: 65532, gid: 65532, groups: [65532] }, "the process has no other identity");
  });

  t.test("--help, proxy --help and manager --help run on a read-only root filesystem without capabilities", async (t) => {
    const probe = await runImage(image, ["--network=none", ...RESTRICTED, "--entrypoint", "/usr/local/bin/node"], [
      "-e",
      "for (const d of ['/', '/tmp', '/app', '/home/nonroot']) { try { require('fs').writeFileSync(d + '/.w', ''); console.log('wrote ' + d) } catch (e) { console.log(e.code + ' ' + d) } }",
    ]);
    t.equal(probe.code, 0, probe.stderr);
    t.same(probe.stdout.trim().split("\n"), ["EROFS /", "EROFS /tmp", "EROFS /app", "EROFS /home/nonroot"], "the root filesystem really is read-only here");
    for (const [args, usage] of [
      [["--help"], "Usage: shardcar <command>"],
      [["proxy", "--help"], "Usage: shardcar proxy"],
      [["manager", "--help"], "Usage: shardcar manager"],
    ] as const) {
      const r = await runImage(image, ["--network=none", ...RESTRICTED], [...args]);
      t.equal(r.code, 0, `${args.join(" ")} exits 0 (${r.stderr.trim()})`);
      t.match(r.stdout, new RegExp(`^${usage.replace(/[<>]/g, "\\$&")}`), `${args.join(" ")} prints its usage`);
      t.equal(r.stderr, "", `${args.join(" ")} writes nothing to stderr (no warning about an unwritable path)`);
    }
  });

  t.test("node_modules holds exactly the production dependencies of package-lock.json", async (t) => {
    const lock = JSON.parse(readFileSync(join(ROOT, "package-lock.json"), "utf8")) as {
      packages: Record<string, { dev?: boolean; optional?: boolean }>;
    };
    const dev: string[] = [];
    const prod: string[] = [];
    for (const [key, meta] of Object.entries(lock.packages)) {
      if (key === "") continue;
      if (meta.dev === true) dev.push(key);
      else if (meta.optional !== true) prod.push(key);
    }
    // (@types/node is not among them: a production dependency of client-node's needs it.)
    for (const known of ["node_modules/tap", "node_modules/typescript", "node_modules/eslint", "node_modules/typescript-eslint", "node_modules/node"]) {
      t.ok(dev.includes(known), `the lockfile lists ${known} as a dev dependency (the check below covers it)`);
    }
    const devPresent = dev.filter((p) => paths.has(`/app/${p}`));
    t.same(devPresent, [], "no dev dependency is in the image");
    const prodMissing = prod.filter((p) => !paths.has(`/app/${p}`));
    t.same(prodMissing, [], "every production dependency is in the image");
    const topLevel = readdirSync(join(mount, "app/node_modules")).filter((n) => !n.startsWith("."));
    const unknown = topLevel
      .flatMap((n) => (n.startsWith("@") ? readdirSync(join(mount, "app/node_modules", n)).map((m) => `${n}/${m}`) : [n]))
      .filter((n) => lock.packages[`node_modules/${n}`] === undefined);
    t.same(unknown, [], "nothing in node_modules that the lockfile does not name");
  });

  t.test("no compiler, build tool, package manager or shell; node's native code is node and its libraries", async (t) => {
    const forbidden = new Set([
      "cc", "gcc", "g++", "c++", "cpp", "clang", "clang++", "ld", "ld.bfd", "ld.gold", "as", "make", "cmake", "python3", "node-gyp",
      "tsc", "tsgo", "npm", "npx", "npm-cli.js", "corepack", "yarn", "pnpm", "apt", "apt-get", "dpkg", "sh", "bash", "dash", "busybox",
    ]);
    const hits = entries.filter((e) => e.kind !== "dir" && forbidden.has(basename(e.path))).map((e) => e.path);
    t.same(hits, [], "none of these names exists anywhere in the image");
    t.notOk(existsSync(join(mount, "usr/local/lib/node_modules")), "no global node_modules (npm, corepack)");
    const elf = entries.filter((e) => e.elf).map((e) => e.path);
    t.ok(elf.includes("/usr/local/bin/node"), "node is there");
    const lib = /^\/(usr\/)?lib(64)?\/([^/]+\/)?[^/]+\.so(\.[0-9]+)*$/;
    // tar-fs (client-node's) lists bare-fs & co. for the Bare runtime; their
    // prebuilt .bare binaries are never loaded by Node (tar-fs imports them
    // only under the "bare" condition).
    const barePrebuild = /^\/app\/node_modules\/bare-[a-z]+\/prebuilds\/[^/]+\/[^/]+\.bare$/;
    const other = elf.filter((p) => p !== "/usr/local/bin/node" && !lib.test(p) && !barePrebuild.test(p));
    t.same(other, [], "every other ELF file is a shared library in a library directory (no .node addon, no tool)");
  });

  t.test("no npm cache or npm state anywhere in the image", async (t) => {
    const caches = entries.filter((e) => ["_cacache", ".npm", "_npx", ".npmrc", "_logs"].includes(basename(e.path))).map((e) => e.path);
    t.same(caches, [], "no _cacache, .npm, _npx, .npmrc or npm logs");
    t.notOk(paths.has("/root"), "no /root home (npm's cache lives in $HOME/.npm)");
  });

  t.test("the image's size stays within its budget", async (t) => {
    const inspect = await podman(["image", "inspect", image, "--format", "{{.Size}}"]);
    const size = Number(inspect.stdout.trim());
    t.ok(Number.isSafeInteger(size) && size > 0, `podman reports a size (${inspect.stdout.trim()})`);
    t.comment(`image size: ${(size / 1e6).toFixed(1)} MB uncompressed (budget ${SIZE_BUDGET_BYTES / 1e6} MB)`);
    t.ok(size <= SIZE_BUDGET_BYTES, `${(size / 1e6).toFixed(1)} MB ≤ ${SIZE_BUDGET_BYTES / 1e6} MB`);
    // What a registry stores and a node pulls: the gzip-compressed layers,
    // from an OCI layout podman writes (reported, for docs/install.md).
    const dir = mkdtempSync(join(tmpdir(), "shardcar-oci-"));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const pushed = await podman(["push", "--compression-format", "gzip", image, `oci:${dir}:image`]);
    t.equal(pushed.code, 0, pushed.stderr);
    const index = JSON.parse(readFileSync(join(dir, "index.json"), "utf8")) as { manifests: Array<{ digest: string }> };
    const blob = (digest: string): string => join(dir, "blobs", ...digest.split(":"));
    const manifest = JSON.parse(readFileSync(blob(index.manifests[0]?.digest ?? ""), "utf8")) as { layers: Array<{ size: number }> };
    const compressed = manifest.layers.reduce((sum, l) => sum + l.size, 0);
    t.ok(compressed > 0 && compressed < size, `compressed layers are smaller than the image (${compressed} bytes)`);
    t.comment(`image size: ${(compressed / 1e6).toFixed(1)} MB compressed in ${manifest.layers.length} layers`);
  });
}
