/**
 * Issue 15 §4: the manifests against a server. `kubectl apply
 * --dry-run=server -k` and then `kubectl apply -k` of every overlay and
 * component (the components composed as docs/install.md composes them),
 * ending on the single-replica overlay; then the manager runs from the
 * Deployment *as applied* (read back from the server) in self-managed
 * mode, patches its caBundle into the applied MutatingWebhookConfiguration,
 * and the §1 injection cases (support/injection-cases.ts) pass against that
 * configuration.
 */
import t from "tap";
import { join } from "node:path";
import { AdmissionRig, MANAGER_NAMESPACE, ROOT, rigUnavailable, WEBHOOK_CONFIG, kubectl, withKustomization, type Kustomization } from "./support/admission.ts";
import { injectionCases } from "./support/injection-cases.ts";
import { laneGate } from "./support/private-realapi.ts";
import { call, callJson } from "./support/realapi.ts";

const skip = rigUnavailable() ?? false;
const m = (...p: string[]): string => join(ROOT, "manifests", ...p);
const MULTI = m("overlays", "multi-replica");
const SINGLE = m("overlays", "single-replica");

/** Every overlay and component, the last one the configuration the injection cases then run against. */
const TARGETS: ReadonlyArray<{ readonly name: string; readonly what: Kustomization }> = [
  { name: "overlays/multi-replica", what: { dir: MULTI } },
  { name: "overlays/multi-replica + components/cert-manager", what: { resources: [MULTI], components: [m("components", "cert-manager")] } },
  { name: "overlays/multi-replica + components/label-only", what: { resources: [MULTI], components: [m("components", "label-only")] } },
  { name: "overlays/multi-replica + components/label-slots", what: { resources: [MULTI], components: [m("components", "label-slots")] } },
  { name: "overlays/single-replica", what: { dir: SINGLE } },
];

t.test(`gate ${laneGate()}: every overlay and component applies to a real apiserver, and injection works from the applied configuration`, { skip }, async (t) => {
  let first = true;
  const rig = await AdmissionRig.start({
    mode: "self",
    installed: true,
    // The rig has installed cert-manager's CRDs (the cluster's cert-manager) by now.
    install: async (api) => {
      for (const target of TARGETS) {
        await t.test(`${target.name}: kubectl apply --dry-run=server -k, then kubectl apply -k`, async (t) => {
          await withKustomization(target.what, async (dir) => {
            const dry = await kubectl(api, ["apply", "--dry-run=server", "-k", dir]);
            t.match(dry, /\(server dry run\)/, "the server accepted every object in a dry run");
            if (first) {
              const stored = await call(api.admin, `/apis/apps/v1/namespaces/${MANAGER_NAMESPACE}/deployments/shardcar-manager`);
              t.equal(stored.status, 404, "and stored nothing");
            }
            const applied = await kubectl(api, ["apply", "-k", dir]);
            t.match(applied, /mutatingwebhookconfiguration\.admissionregistration\.k8s\.io\/shardcar (created|configured|unchanged)/, "applied, the webhook configuration included");
            first = false;
          });
        });
      }
      await t.test("re-applying overlays/single-replica over the others converges: kubectl diff -k shows nothing", async (t) => {
        const diff = await kubectl(api, ["diff", "-k", SINGLE]).catch((e: unknown) => `${e instanceof Error ? e.message : String(e)}`);
        t.equal(diff, "", "no difference left by the components applied before");
      });
    },
  });
  t.teardown(() => rig.close());

  const webhooks = async (): Promise<Array<{ name: string; clientConfig: { caBundle?: string } }>> =>
    (await callJson<{ webhooks: Array<{ name: string; clientConfig: { caBundle?: string } }> }>(rig.api.admin, "GET", `/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/${WEBHOOK_CONFIG}`)).webhooks;
  t.same((await webhooks()).map((w) => w.clientConfig.caBundle ?? ""), ["", ""], "as applied, both webhooks have no caBundle");
  const args = ((rig.deployment["spec"] as { template: { spec: { containers: Array<{ args: string[] }> } } }).template.spec.containers[0]?.args ?? []).join(" ");
  t.match(args, "--cert-mode=self", "the applied Deployment runs self-managed certificates");

  await rig.startManager();
  const secret = await call(rig.api.admin, `/api/v1/namespaces/${MANAGER_NAMESPACE}/secrets/shardcar-webhook-tls`);
  t.equal(secret.status, 200, "the manager keeps its CA and certificate in its Secret");
  t.ok((await webhooks()).every((w) => (w.clientConfig.caBundle ?? "") !== ""), "and patched caBundle into both applied webhooks");
  await injectionCases(t, rig, { rotation: false });
});
