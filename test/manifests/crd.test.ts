/**
 * The ShardRing CRD against a real apiextensions server (the shared realapi
 * kit: k8s.io/apiserver 1.36 + apiextensions-apiserver + etcd on loopback).
 * kubectl kustomize cannot tell whether a schema is structural, whether the
 * status subresource and printer columns work, or whether the status the
 * ring coordinator writes (src/ring/table.ts, ShardRingStatusJson) is
 * accepted; a real server can.
 *
 * Skipped, with the reason, when the kit has not been built on this machine
 * (`../shared/realapi/setup.sh`, a few minutes, downloads Debian packages).
 */
import t from "tap";
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { fileURLToPath } from "node:url";

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const KIT = fileURLToPath(new URL("../../../shared/realapi/", import.meta.url));
const CACHE = process.env["SHARDCAR_REALAPI_CACHE"] ?? join(homedir(), ".cache", "shardcar-realapi");
const KUBECTL = process.env["KUBECTL"] ?? "kubectl";

const built = existsSync(join(CACHE, "bin", "realapi-server")) && existsSync(join(KIT, "start.sh"));
if (!built) {
  t.plan(0, `realapi kit not built (${join(CACHE, "bin", "realapi-server")} missing); run ../shared/realapi/setup.sh`);
} else {
  // start.sh writes RUN_DIR/env; stop.sh stops both processes by the PIDs
  // recorded there.
  const runDir = mkdtempSync(join(tmpdir(), "shardcar-crd-realapi-"));
  t.teardown(async () => {
    await run("bash", [join(KIT, "stop.sh"), runDir, "--clean"]).catch(() => rmSync(runDir, { recursive: true, force: true }));
  });
  // start.sh picks free ports and then binds them; another process can take
  // one in between (seen under load: etcd's "bind: address already in use").
  // Its failure path stops what it started, so try again on fresh ports, as
  // test/real/run.sh does.
  for (let attempt = 1; ; attempt++) {
    try {
      await run("bash", [join(KIT, "start.sh"), "on"], { env: { ...process.env, REALAPI_RUN_DIR: runDir }, timeout: 90_000 });
      break;
    } catch (e) {
      const out = e instanceof Error && "stderr" in e ? String((e as { stderr: unknown }).stderr) : "";
      if (attempt >= 3 || !out.includes("address already in use")) throw e;
    }
  }
  const env = { ...process.env, KUBECONFIG: join(runDir, "kubeconfig") };
  const kubectl = async (args: string[], input?: string): Promise<{ code: number; out: string }> => {
    return new Promise((resolve) => {
      const child = execFile(KUBECTL, args, { cwd: ROOT, env, maxBuffer: 8 * 1024 * 1024 }, (err, stdout, stderr) => {
        const code = err === null ? 0 : typeof err.code === "number" ? err.code : 1;
        resolve({ code, out: `${stdout}${stderr}` });
      });
      if (input !== undefined) child.stdin?.end(input);
    });
  };

  const { stdout: crd } = await run(KUBECTL, ["kustomize", "manifests/base/crds"], { cwd: ROOT });

  t.test("the CRD is accepted as structural and becomes Established", async (t) => {
    const applied = await kubectl(["apply", "-f", "-"], crd);
    t.equal(applied.code, 0, applied.out);
    const ready = await kubectl(["wait", "--for=condition=Established", "crd/shardrings.shardcar.io", "--timeout=30s"]);
    t.equal(ready.code, 0, ready.out);
    const ns = await kubectl(["create", "namespace", "ring-test"]);
    t.equal(ns.code, 0, ns.out);
  });

  t.test("a ShardRing with the status the coordinator writes is stored through the status subresource, and shown by the printer columns", async (t) => {
    const created = await kubectl(
      ["apply", "-f", "-"],
      JSON.stringify({ apiVersion: "shardcar.io/v1alpha1", kind: "ShardRing", metadata: { name: "guestbook", namespace: "ring-test" }, spec: { handoff: "overlap", filter: "labels", resources: "guestbooks.webapp.my.domain, configmaps=owner" } }),
    );
    t.equal(created.code, 0, created.out);
    const got = JSON.parse((await kubectl(["get", "shardring", "-n", "ring-test", "guestbook", "-o", "json"])).out) as Record<string, unknown>;
    const status = {
      generation: 3,
      slotCount: 256,
      committed: { generation: 2, members: [{ name: "guestbook-6d4f8b7c9d-abcde", slots: "0-127" }, { name: "guestbook-6d4f8b7c9d-fghij", slots: "128-255" }] },
      pending: {
        generation: 3,
        phase: "Widening",
        startedAt: "2026-11-30T08:00:00Z",
        deadline: "2026-11-30T08:01:00Z",
        members: [
          { name: "guestbook-6d4f8b7c9d-abcde", slots: "0-84" },
          { name: "guestbook-6d4f8b7c9d-fghij", slots: "85-170" },
          { name: "guestbook-6d4f8b7c9d-klmno", slots: "171-255" },
        ],
      },
      members: 2,
      coverage: { readyRatio: 1, overlapRatio: 0.25 },
      labelling: {
        label: "shard.shardcar.io/guestbook",
        unlabelled: 3,
        resources: [
          { resource: "guestbooks.webapp.my.domain", key: "uid", synced: true, objects: 10, labelled: 8, unlabelled: 1, mislabelled: 1 },
          { resource: "configmaps", key: "owner", synced: false, objects: 0, labelled: 0, unlabelled: 1, mislabelled: 0 },
        ],
      },
      conditions: [
        { type: "Refused", status: "False", reason: "Valid", message: "", lastTransitionTime: "2026-11-30T08:00:00Z" },
        { type: "Labelled", status: "False", reason: "Backfilling", message: "3 of 10 objects lack the right shard.shardcar.io/guestbook", lastTransitionTime: "2026-11-30T08:00:00Z" },
      ],
    };
    const put = await kubectl(["replace", "--subresource=status", "-f", "-"], JSON.stringify({ ...got, status }));
    t.equal(put.code, 0, put.out);
    const stored = JSON.parse((await kubectl(["get", "shardring", "-n", "ring-test", "guestbook", "-o", "json"])).out) as { status: unknown; spec: unknown };
    t.same(stored.status, status, "nothing pruned: the schema covers every field the coordinator (and its labeller) writes");
    t.match(stored.spec, { filter: "labels", resources: "guestbooks.webapp.my.domain, configmaps=owner" }, "the label-slot spec is kept");
    const table = await kubectl(["get", "shardrings", "-n", "ring-test"]);
    t.match(table.out, /NAME\s+GENERATION\s+PENDING\s+MEMBERS\s+READY\s+FILTER\s+UNLABELLED\s+AGE\nguestbook\s+2\s+3\s+2\s+1\s+labels\s+3\s/);
    const spec = await kubectl(["patch", "shardring", "-n", "ring-test", "guestbook", "--type=merge", "-p", '{"status":{"members":9}}']);
    t.equal(spec.code, 0);
    const after = JSON.parse((await kubectl(["get", "shardring", "-n", "ring-test", "guestbook", "-o", "json"])).out) as { status: { members: number } };
    t.equal(after.status.members, 2, "status changes only through the status subresource");
  });

  t.test("the server refuses what the schema forbids", async (t) => {
    const bad = await kubectl(["patch", "shardring", "-n", "ring-test", "guestbook", "--type=merge", "-p", '{"spec":{"handoff":"graceful"}}']);
    t.not(bad.code, 0);
    t.match(bad.out, /spec.handoff: Unsupported value: "graceful"/);
    const slots = await kubectl(["patch", "shardring", "-n", "ring-test", "guestbook", "--type=merge", "-p", '{"spec":{"slots":0}}']);
    t.not(slots.code, 0);
    t.match(slots.out, /spec.slots/);
    const filter = await kubectl(["patch", "shardring", "-n", "ring-test", "guestbook", "--type=merge", "-p", '{"spec":{"filter":"label"}}']);
    t.not(filter.code, 0);
    t.match(filter.out, /spec.filter: Unsupported value: "label": supported values: "shardselector", "labels"/);
    const bare = await kubectl(["apply", "-f", "-"], JSON.stringify({ apiVersion: "shardcar.io/v1alpha1", kind: "ShardRing", metadata: { name: "bare", namespace: "ring-test" }, spec: { filter: "labels" } }));
    t.not(bare.code, 0);
    t.match(bare.out, /spec.filter "labels" needs spec.resources/);
  });
}
