/**
 * Decision edge cases that do not deserve a whole golden pod: one valid
 * default pod, and each row changes only what it tests.
 */
import t from "tap";
import { decideInjection, type InjectionDecision } from "../../src/webhook/decide.ts";
import type { JsonObject } from "../../src/webhook/json.ts";
import { testConfig } from "./support.ts";

const SA = "/var/run/secrets/kubernetes.io/serviceaccount";

type PodParts = { apiVersion: string; kind: string; metadata: JsonObject; spec: JsonObject };

function defaultPod(): PodParts {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      generateName: "ctrl-5d8f9c7b6-",
      namespace: "apps",
      labels: { "pod-template-hash": "5d8f9c7b6", "shardcar.io/inject": "true" },
      annotations: { "shardcar.io/resources": "pods" },
      ownerReferences: [{ apiVersion: "apps/v1", kind: "ReplicaSet", name: "ctrl-5d8f9c7b6", uid: "u", controller: true }],
    },
    spec: {
      containers: [{ name: "ctrl", image: "ctrl:1", volumeMounts: [{ name: "kube-api-access-abcde", mountPath: SA, readOnly: true }] }],
      volumes: [{ name: "kube-api-access-abcde", projected: { sources: [] } }],
    },
  };
}

type Edit = (p: PodParts) => void;
const rows: Array<{ name: string; edit: Edit; want: (d: InjectionDecision) => string | undefined }> = [];

const plan = (check: (p: Extract<InjectionDecision, { inject: true }>["plan"]) => string | undefined) => (d: InjectionDecision) =>
  "refuse" in d ? `refused: ${d.refuse}` : d.inject ? check(d.plan) : `skipped: ${d.reason}`;
const refusal = (fragment: string) => (d: InjectionDecision) =>
  "refuse" in d ? (d.refuse.includes(fragment) ? undefined : `message lacks ${fragment}: ${d.refuse}`) : `not refused: ${JSON.stringify(d)}`;
const skipped = (reason: string) => (d: InjectionDecision) => ("refuse" in d || d.inject ? `not skipped: ${JSON.stringify(d)}` : d.reason === reason ? undefined : `reason ${d.reason}`);

rows.push(
  { name: "the default pod is injected, ring named after the Deployment (pod-template-hash stripped)", edit: () => {}, want: plan((p) => (p.ring === "ctrl" ? undefined : `ring ${p.ring}`)) },
  {
    name: "a StatefulSet owner names the ring as is",
    edit: (p) => {
      p.metadata["ownerReferences"] = [{ kind: "StatefulSet", name: "db-shards", controller: true }];
    },
    want: plan((p) => (p.ring === "db-shards" ? undefined : `ring ${p.ring}`)),
  },
  {
    name: "a ReplicaSet whose name does not end in the hash keeps its name",
    edit: (p) => {
      p.metadata["labels"] = { "shardcar.io/inject": "true", "pod-template-hash": "zzz" };
    },
    want: plan((p) => (p.ring === "ctrl-5d8f9c7b6" ? undefined : `ring ${p.ring}`)),
  },
  {
    name: "an owner whose name cannot be a ring name is refused, asking for shardcar.io/ring",
    edit: (p) => {
      p.metadata["ownerReferences"] = [{ kind: "Job", name: "nightly.sync", controller: true }];
    },
    want: refusal('owner\'s name "nightly.sync" is not a valid ring name'),
  },
  {
    name: "a sidecar added by hand, without a status, is left alone",
    edit: (p) => {
      (p.spec["containers"] as JsonObject[]).push({ name: "shardcar-proxy" });
    },
    want: skipped("sidecar-present"),
  },
  {
    name: "an annotation opt-in works without the label",
    edit: (p) => {
      p.metadata["labels"] = {};
      p.metadata["annotations"] = { "shardcar.io/inject": "true", "shardcar.io/resources": "pods" };
    },
    want: plan(() => undefined),
  },
  {
    name: "a trailing slash on the service-account mount path still counts as that path",
    edit: (p) => {
      p.spec["containers"] = [{ name: "ctrl", volumeMounts: [{ name: "tok", mountPath: `${SA}/` }] }];
    },
    want: plan((p) => (p.tokenVolume === "tok" ? undefined : `tokenVolume ${p.tokenVolume}`)),
  },
  {
    name: "app containers mounting different token volumes are refused",
    edit: (p) => {
      p.spec["containers"] = [
        { name: "a", volumeMounts: [{ name: "tok-a", mountPath: SA }] },
        { name: "b", volumeMounts: [{ name: "tok-b", mountPath: SA }] },
      ];
    },
    want: refusal('"tok-a" in "a", "tok-b" in "b"'),
  },
  {
    name: "a subPath mount of the token directory is refused",
    edit: (p) => {
      p.spec["containers"] = [{ name: "ctrl", volumeMounts: [{ name: "tok", mountPath: SA, subPath: "sa" }] }];
    },
    want: refusal("subPath"),
  },
  {
    name: "a pod whose only container is a mesh proxy has nothing to wire",
    edit: (p) => {
      p.spec["containers"] = [{ name: "istio-proxy" }];
    },
    want: refusal("no app container"),
  },
  {
    name: "a volume named like shardcar's is refused",
    edit: (p) => {
      (p.spec["volumes"] as JsonObject[]).push({ name: "shardcar-serviceaccount", emptyDir: {} });
    },
    want: refusal('volume named "shardcar-serviceaccount"'),
  },
  {
    name: "an init container using the proxy port is refused",
    edit: (p) => {
      p.spec["initContainers"] = [{ name: "warmup", ports: [{ containerPort: 7443 }] }];
    },
    want: refusal("port 7443, which the shardcar-proxy sidecar needs for its loopback API listener"),
  },
  {
    name: "without a label, an invalid annotation toggle is refused too",
    edit: (p) => {
      p.metadata["labels"] = {};
      p.metadata["annotations"] = { "shardcar.io/inject": "True" };
    },
    want: refusal('invalid shardcar.io/inject annotation "True"'),
  },
  {
    name: "a pod that did not opt in is not validated at all",
    edit: (p) => {
      p.metadata["labels"] = {};
      p.metadata["annotations"] = { "shardcar.io/shards": "nonsense" };
    },
    want: skipped("not-opted-in"),
  },
  {
    name: "an old client-go ConfigMap lock is accepted, as the proxy's --leader-election accepts it",
    edit: (p) => {
      p.metadata["annotations"] = { "shardcar.io/resources": "pods", "shardcar.io/leader-election": "configmaps/ctrl-lock" };
    },
    want: plan((p) => (p.settings.leaderElection?.resource === "configmaps" && p.settings.leaderElection.name === "ctrl-lock" ? undefined : JSON.stringify(p.settings.leaderElection))),
  },
  {
    name: "a static selector is accepted and needs no ring",
    edit: (p) => {
      p.metadata["annotations"] = {
        "shardcar.io/resources": "pods",
        "shardcar.io/shards": "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')",
      };
    },
    want: plan((p) => (p.ring === undefined && p.settings.shards.mode === "selector" ? undefined : JSON.stringify(p.settings))),
  },
);

for (const row of rows) {
  t.test(row.name, async (t) => {
    const pod = defaultPod();
    row.edit(pod);
    const problem = row.want(decideInjection(pod, testConfig()));
    t.equal(problem, undefined);
  });
}

t.test("the decision is pure: the pod is not modified", async (t) => {
  const pod = defaultPod();
  const before = JSON.stringify(pod);
  decideInjection(pod, testConfig());
  t.equal(JSON.stringify(pod), before);
});
