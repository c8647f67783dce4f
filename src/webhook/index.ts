/**
 * The injection webhook: decides whether a pod gets the shardcar sidecar,
 * builds the JSON Patch that wires it in, and serves both over HTTPS as
 * AdmissionReview v1; the stamping webhook of label slots (the slot label of
 * labels-mode rings' objects, `label-review.ts`, docs/label-slots.md); plus
 * the webhook's own serving certificates.
 *
 * Layers, pure first:
 * - `annotations.ts`: the `shardcar.io/*` annotations and their validation;
 * - `decide.ts`: `decideInjection(pod, config)`, a pure decision with a
 *   typed reason (skip), a message (refuse) or a plan (inject);
 * - `patch.ts`: `buildInjectionPatch(rawPod, plan)`, RFC 6902 operations made
 *   by editing a copy of the raw JSON and diffing (`jsonpatch.ts`);
 * - `review.ts` and `response.ts`: the AdmissionReview envelope;
 * - `label-review.ts`: `/label-slots`, the slot labels on CREATE and UPDATE;
 * - `server.ts`: the HTTPS edge (limits, content type, UID echo);
 * - `certs.ts` and `pki.ts`: serving certificates (self-managed or
 *   cert-manager) and the small PKI shared with the sidecar's pod CA.
 *
 * Must never: decode a pod into a typed model (unknown fields must survive),
 * read `process` or the environment, or change a pod that did not opt in.
 * Only `certs.ts` and `server.ts` do I/O.
 *
 * @packageDocumentation
 */
export { ANNOTATIONS, parsePodSettings, readInjectToggle, type PodSettings } from "./annotations.ts";
export {
  DEFAULT_ADMIN_PORT,
  DEFAULT_PROXY_PORT,
  SERVICE_ACCOUNT_DIR,
  SHARED_VOLUME,
  SIDECAR_NAME,
  SIDECAR_SHARED_DIR,
  defaultInjectorConfig,
  type InjectorConfig,
} from "./config.ts";
export { decideInjection, type AdmissionContext, type InjectionDecision, type InjectionPlan, type SkipReason } from "./decide.ts";
export { buildInjectionPatch, type InjectionStatus } from "./patch.ts";
export type { JsonPatchOperation } from "./jsonpatch.ts";
export { allowed, denied, errored, patched, completeReview, type AdmissionResponse, type AdmissionReviewResponse } from "./response.ts";
export { reviewPodAdmission, type ReviewOutcome, type ReviewResult } from "./review.ts";
export { reviewLabelAdmission, type LabelOutcome, type LabelReviewResult } from "./label-review.ts";
export { LABEL_SLOTS_PATH, MAX_REVIEW_BYTES, MUTATE_PODS_PATH, startWebhookServer, type LabelSlotsEndpoint, type WebhookServer, type WebhookServerOptions } from "./server.ts";
export {
  DEFAULT_CERT_POLICY,
  FileCertificates,
  SelfManagedCertificates,
  kubeSecretStore,
  kubeWebhookConfigStore,
  watchCertificates,
  webhookDnsNames,
  type CertificateSource,
} from "./certs.ts";
export type { TlsMaterial } from "../pki/ca.ts";
