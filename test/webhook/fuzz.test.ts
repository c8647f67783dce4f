/**
 * The manager's webhook endpoint answers every AdmissionReview, however
 * malformed, with a well-formed AdmissionReview (the request's uid, allowed
 * or a clear denial) or an HTTP 400, never crashes, and never patches a pod
 * that did not opt in.
 *
 * The webhook server runs as the manager starts it (startWebhookServer, TLS
 * from a CA only the test trusts, the manager's injector config). The corpus
 * is the golden pods of test/webhook/testdata/inject/, each wrapped in an
 * AdmissionReview as the apiserver sends it; each case flips the opt-in or
 * plants bad annotation values, then damages the review (structure, envelope,
 * text, framing: test/support/fuzz/admission.ts) and sends it raw over TLS.
 * Short and fixed in `npm test`; `npm run fuzz` runs it for half of
 * `SHARDCAR_FUZZ_SECONDS` (the other webhook fuzzer has the other half, on
 * the same job) with a fresh seed.
 */
import t from "tap";
import { fileURLToPath } from "node:url";
import { ANNOTATIONS } from "../../src/webhook/annotations.ts";
import { MUTATE_PODS_PATH } from "../../src/webhook/server.ts";
import { fuzzAdmission, goldenCorpus, requestObject } from "../support/fuzz/admission.ts";
import type { Json } from "../support/fuzz/json-mutate.ts";
import type { Random } from "../support/fuzz/random.ts";
import { fuzzSettings } from "../support/fuzz/runner.ts";
import { reviewFor, startTestWebhook, testConfig } from "./support.ts";

const FILE = "test/webhook/fuzz.test.ts";
const DIR = fileURLToPath(new URL("./testdata/inject/", import.meta.url));
const INJECT = ANNOTATIONS.inject;
/** Growth allowed from the warm sample to the end, after a forced GC (see docs/testing.md). */
const BOUNDS = { rssMiB: 160, heapMiB: 32, fds: 16 };

type JsonMap = { [key: string]: Json };
const isMap = (v: Json | undefined): v is JsonMap => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * Whether the pod asked for injection, as docs/install.md states it: the
 * `shardcar.io/inject` label, or, without that label, the annotation, is the
 * string "true". Written from the documentation, not from the code.
 */
function optedIn(pod: JsonMap | undefined): boolean {
  const metadata = isMap(pod?.["metadata"]) ? (pod["metadata"]) : {};
  const labels = metadata["labels"];
  const annotations = metadata["annotations"];
  const label = isMap(labels) ? labels[INJECT] : undefined;
  if (typeof label === "string") return label === "true";
  return isMap(annotations) && annotations[INJECT] === "true";
}

const BAD_VALUES = (rnd: Random): string[] => [
  "",
  " ",
  "true ",
  "TRUE",
  "yes",
  "\u0000",
  "é",
  "x".repeat(rnd.size(300_000)),
  "pods, , configmaps",
  "pods=cluster",
  "ring",
  "0/3",
  "3/3",
  "-1/3",
  "1/0",
  "ordinal/0",
  "ordinal/100000000000000000000",
  `${"(".repeat(rnd.between(200, 60_000))}shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')`,
  Array.from({ length: rnd.between(2, 20_000) }, () => "a").join("||"),
  "leases/UPPER",
  "leases/" + "a".repeat(300),
  "configmaps/x/y",
  Array.from({ length: rnd.between(2, 5000) }, (_, i) => `r${i}`).join(","),
];

/** One change to what the pod asks for: its opt-in, or a shardcar.io/ annotation. */
function mutatePod(rnd: Random, pod: JsonMap): string {
  const metadata = isMap(pod["metadata"]) ? pod["metadata"] : (pod["metadata"] = {});
  const map = (key: "labels" | "annotations"): JsonMap => (isMap(metadata[key]) ? (metadata[key]) : (metadata[key] = {}));
  const value = (): Json | undefined => rnd.pick<Json | undefined>(["true", "false", undefined, "", "True", "yes", true, 1, null, ["true"]]);
  switch (rnd.int(4)) {
    case 0: {
      const v = value();
      if (v === undefined) delete map("labels")[INJECT];
      else map("labels")[INJECT] = v;
      return `label ${INJECT}: ${JSON.stringify(v ?? "absent")}`;
    }
    case 1: {
      const v = value();
      if (v === undefined) delete map("annotations")[INJECT];
      else map("annotations")[INJECT] = v;
      return `annotation ${INJECT}: ${JSON.stringify(v ?? "absent")}`;
    }
    default: {
      const key = rnd.pick([...Object.values(ANNOTATIONS), "shardcar.io/shard", "shardcar.io/", "SHARDCAR.IO/inject"]);
      const v = rnd.pick(BAD_VALUES(rnd));
      map("annotations")[key] = v;
      return `annotation ${key}: ${JSON.stringify(v.slice(0, 40))}${v.length > 40 ? `… (${v.length} characters)` : ""}`;
    }
  }
}

t.test("every AdmissionReview gets a well-formed answer or a 400, and no pod that did not opt in is patched", async (t) => {
  const settings = fuzzSettings({ cases: 600, seed: 20261202, concurrency: 6, share: 0.5 });
  const webhook = await startTestWebhook(t, testConfig());
  const pods = goldenCorpus(DIR, ".pod.json");
  t.ok(pods.length >= 30, `the golden pods are the corpus (${pods.length})`);

  await fuzzAdmission(t, {
    name: "webhook",
    file: FILE,
    settings,
    webhook,
    path: MUTATE_PODS_PATH,
    corpus: pods,
    review(rnd: Random, pod: JsonMap, uid: string) {
      const notes: string[] = [];
      for (let k = rnd.weighted<number>([
        [3, 0],
        [5, 1],
        [2, 2],
      ]); k > 0; k--)
        notes.push(mutatePod(rnd, pod));
      return { review: reviewFor(pod, { uid, ...(rnd.chance(0.1) ? { namespace: rnd.pick(["shardcar-system", "default"]) } : {}) }) as Json, notes };
    },
    rules: (body, answer) => (answer.patch !== undefined && answer.patch.length > 0 && !optedIn(requestObject(body)) ? ["a patch for a pod that did not opt in"] : []),
    bounds: BOUNDS,
  });
});
