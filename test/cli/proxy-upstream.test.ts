/**
 * `shardcar proxy` with a `--server` nothing answers on: it keeps
 * listening, its /readyz says which upstream fails and how, and the
 * controller's requests are answered with a message that names both, in a
 * form client-go shows (kubectl's discovery included), not "unknown".
 */
import t from "tap";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { main } from "../../src/cli/main.ts";
import { captureIo } from "../support/cli.ts";
import { until } from "../support/wait.ts";

t.test("an unreachable --server keeps the proxy listening and unready, and its answers name the upstream and the error", async (t) => {
  const gone = createServer();
  await new Promise<void>((resolve) => gone.listen(0, "127.0.0.1", resolve));
  const port = (gone.address() as AddressInfo).port;
  await new Promise((resolve) => gone.close(resolve));
  const upstream = `http://127.0.0.1:${port}`;

  const stop = new AbortController();
  const io = captureIo(stop.signal);
  const done = main(["proxy", "--server", upstream, "--resources", "pods", "--shards", "0/2", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--log-level", "silent"], io.io);
  t.teardown(async () => {
    stop.abort();
    await done;
  });
  const urls = (): RegExpExecArray | null => /listening on (http:\/\/\S+) \(admin (http:\/\/\S+)\)/.exec(io.out());
  await until("the proxy to listen", () => urls() !== null);
  const [, proxy = "", admin = ""] = urls() ?? [];

  let ready = { status: 0, text: "" };
  await until("/readyz to name the upstream's error", async () => {
    const r = await fetch(`${admin}/readyz`);
    ready = { status: r.status, text: await r.text() };
    return /ECONNREFUSED/.test(ready.text);
  });
  t.equal(ready.status, 503, "unready");
  t.match(ready.text, `upstream: ${upstream}: connect ECONNREFUSED 127.0.0.1:${port}`);

  for (const path of ["/apis", "/api/v1/pods"]) {
    const r = await fetch(`${proxy}${path}`);
    t.equal(r.status, 502, `${path}: answered by the listening proxy`);
    t.match(r.headers.get("content-type"), /^text\/plain/, `${path}: as text, which client-go's discovery shows`);
    t.equal(await r.text(), `shardcar: apiserver ${upstream} unreachable: connect ECONNREFUSED 127.0.0.1:${port}\n`);
  }
});
