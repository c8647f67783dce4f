/**
 * Issue 15 §1: injection through the real admission chain. The webhook
 * configuration exactly as `kubectl kustomize manifests/overlays/single-replica`
 * renders it (cert-manager mode: with components/cert-manager, and caBundle
 * filled as its CA injector would), `shardcar manager` run as the pod its
 * Deployment makes (test/support/kubelet/), pods created through the
 * apiserver; the cases are in support/injection-cases.ts.
 */
import t from "tap";
import { AdmissionRig, rigUnavailable, type CertMode } from "./support/admission.ts";
import { injectionCases } from "./support/injection-cases.ts";
import { laneGate } from "./support/private-realapi.ts";

const skip = rigUnavailable() ?? false;

for (const mode of ["self", "cert-manager"] as CertMode[]) {
  t.test(`gate ${laneGate()}, ${mode === "self" ? "self-managed" : "cert-manager"} certificates: injection through the apiserver's admission chain`, { skip }, async (t) => {
    const rig = await AdmissionRig.start({ mode });
    t.teardown(() => rig.close());
    await rig.startManager();
    await injectionCases(t, rig, { rotation: mode === "self" });
  });
}
