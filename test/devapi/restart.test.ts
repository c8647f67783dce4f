/**
 * devapi's fault hooks, used by the fault tests (test/support/faults): a
 * restart that looks like an apiserver restart to its clients, and a
 * compaction that makes older resourceVersions unservable, as etcd's does.
 */
import t from "tap";
import { connect } from "node:net";
import { call, meta, pod, withApi } from "./helpers.ts";
import { WatchClient } from "./transcript.ts";

t.test("a restart ends open watches, refuses connections while down, and serves the same data on the same port afterwards", async (t) => {
  const api = await withApi(t);
  api.store.create("pods", pod("a", "p1"));
  const w = new WatchClient(api.url, "/api/v1/pods?watch=true", {});
  t.teardown(() => w.abort());
  t.equal(await w.ready, 200);
  let refused = false;
  await api.restart(async () => {
    refused = await new Promise<boolean>((resolve) => {
      const s = connect(api.port, "127.0.0.1");
      s.once("connect", () => {
        s.destroy();
        resolve(false);
      });
      s.once("error", () => resolve(true));
    });
    api.store.create("pods", pod("a", "p2"));
  });
  t.ok(await w.waitFor(() => w.ended, 3000), "the open watch ended with the restart");
  t.ok(refused, "a connection while down was refused");
  // A fresh connection (the shared agent may still pool one the restart closed).
  const r = await fetch(`${api.url}/api/v1/namespaces/a/pods`);
  t.equal(r.status, 200, "it serves again on the same port");
  const body = (await r.json()) as { items?: unknown[] };
  t.same((body.items ?? []).map((i) => meta(i).name), ["p1", "p2"], "with the data from before, and what was written while down");
});

t.test("after a compaction a watch, an exact LIST and a continue token from before it get 410 Expired; from the compacted revision on, a watch resumes", async (t) => {
  const api = await withApi(t);
  for (let i = 0; i < 4; i++) api.store.create("pods", pod("a", `p${i}`));
  const before = Number(api.store.resourceVersion) - 1;
  const page = await call(api, "GET", "/api/v1/pods?limit=2");
  const token = String(meta(page.body).continue);
  api.store.create("pods", pod("a", "p4"));
  const at = api.store.compact();
  t.equal(at, api.store.resourceVersion, "it compacts at the current resourceVersion");

  const old = new WatchClient(api.url, `/api/v1/pods?watch=true&resourceVersion=${before}`, {});
  t.teardown(() => old.abort());
  t.ok(await old.waitFor(() => old.ended, 3000), "a watch from before the compaction ends at once");
  t.match((old.events[0] as { object?: unknown } | undefined)?.object, { kind: "Status", code: 410, reason: "Expired" }, "with a 410 Expired ERROR event");
  t.match((await call(api, "GET", `/api/v1/pods?resourceVersion=${before}&resourceVersionMatch=Exact`)).body, { code: 410, reason: "Expired" }, "a LIST at an exact resourceVersion before it gets 410");
  t.match((await call(api, "GET", `/api/v1/pods?limit=2&continue=${encodeURIComponent(token)}`)).body, { code: 410, reason: "Expired" }, "a continue token from before it gets 410");

  const fresh = new WatchClient(api.url, `/api/v1/pods?watch=true&resourceVersion=${at}`, {});
  t.teardown(() => fresh.abort());
  t.equal(await fresh.ready, 200);
  api.store.create("pods", pod("a", "p5"));
  t.ok(await fresh.waitFor(() => fresh.events.length >= 1, 3000), "a watch from the compacted revision resumes");
  t.equal(meta((fresh.events[0] as { object?: unknown }).object).name, "p5");
});
