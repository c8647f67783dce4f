import t from "tap";
import { KubeConfig } from "@kubernetes/client-node";
import { ConfigError } from "../../src/errors.ts";
import { ApiClient } from "../../src/kube/client.ts";
import { systemClock } from "../../src/ring/clock.ts";
import { ringApiClient } from "../../src/ring/kube.ts";
import { runCoordinator } from "../../src/ring/coordinator.ts";
import { RingMember } from "../../src/ring/member.ts";

t.test("a ring shell given neither a client nor a kubeconfig fails naming its setting", async (t) => {
  t.throws(() => new RingMember({ namespace: "ns", ring: "r", member: "m" }), new ConfigError("ring", "a ring member needs an API client or a kubeconfig"));
  await t.rejects(runCoordinator({ namespace: "ns", identity: "me" }, new AbortController().signal), new ConfigError("manager", "the ring coordinator needs an API client or a kubeconfig"));
});

t.test("a ring shell uses the client it is given, else one for the kubeconfig", async (t) => {
  const kc = new KubeConfig();
  kc.loadFromOptions({ clusters: [{ name: "c", server: "https://127.0.0.1:1", skipTLSVerify: false }], users: [{ name: "u" }], contexts: [{ name: "x", cluster: "c", user: "u" }], currentContext: "x" });
  const given = ringApiClient({ kubeConfig: kc }, systemClock, "ring", "a member");
  t.ok(given instanceof ApiClient, "a client made for the kubeconfig");
  t.equal(ringApiClient({ client: given, kubeConfig: new KubeConfig() }, systemClock, "ring", "a member"), given, "the client wins over the kubeconfig");
});
