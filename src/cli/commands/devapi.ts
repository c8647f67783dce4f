import { switchFlags, valueFlags } from "../../flag-table.ts";
import { readFileSync } from "node:fs";
import { startDevApi, seedPods, isGateMode, GATE_MODES } from "../../devapi/index.ts";
import { createLogger } from "../../log.ts";
import type { Command } from "../command.ts";
import { UsageError, durationFlag, intFlag, parseFlags } from "../flags.ts";

export const devapiCommand: Command = {
  name: "devapi",
  usage: `Usage: shardcar devapi [flags]

Runs devapi, a small in-memory Kubernetes-like API server with KEP-5866
sharded LIST/WATCH, until interrupted. Prints its URL on stdout. Not a real
apiserver: JSON only, no admission, no protobuf (see docs/devapi.md).

Flags:
  --host ADDR              listen address (default 127.0.0.1)
  --port N                 listen port; 0 picks one (default 8080)
  --gate MODE              ${GATE_MODES.join(" | ")} (default on)
  --seed-pods N            create N pods at start (default 0)
  --namespaces N           spread seeded pods over N namespaces ns-0.. (default 6)
  --pod-bytes N            approximate size of each seeded pod (default ~1 KB)
  --watch-history N        events kept per resource; older resourceVersions get 410 (default 10000)
  --bookmark-interval D    periodic BOOKMARK interval, e.g. 1s, 60s (default 60s)
  --tls-cert FILE          serve HTTPS with this certificate (needs --tls-key)
  --tls-key FILE           the certificate's private key
  --require-token          answer 401 to requests without a bearer token
  --log-level LEVEL        pino level (default info)

Examples:
  shardcar devapi --port 8080 --gate on --seed-pods 3000 --namespaces 6
  shardcar devapi --port 0 --gate mixed --seed-pods 20000 --pod-bytes 4096
  kubectl --server http://127.0.0.1:8080 get pods -A
`,
  async run(argv, io) {
    const { values } = parseFlags(argv, {
      ...valueFlags("host", "port", "gate", "seed-pods", "namespaces", "pod-bytes", "watch-history", "bookmark-interval", "tls-cert", "tls-key", "log-level"),
      ...switchFlags("require-token"),
    });
    const gate = values.gate ?? "on";
    if (!isGateMode(gate)) throw new UsageError("--gate", `invalid --gate ${JSON.stringify(gate)}: expected one of ${GATE_MODES.join(", ")}`);
    const port = intFlag("--port", values.port, 8080, 0, 65535);
    const seed = intFlag("--seed-pods", values["seed-pods"], 0, 0, 1_000_000);
    const namespaces = intFlag("--namespaces", values.namespaces, 6, 1, 10_000);
    const podBytes = values["pod-bytes"] === undefined ? undefined : intFlag("--pod-bytes", values["pod-bytes"], 0, 0, 1_000_000);
    const watchHistory = intFlag("--watch-history", values["watch-history"], 10_000, 1, 10_000_000);
    const bookmarkIntervalMs = durationFlag("--bookmark-interval", values["bookmark-interval"], 60_000);
    if (bookmarkIntervalMs <= 0) throw new UsageError("--bookmark-interval", "--bookmark-interval must be positive");
    const certFile = values["tls-cert"];
    const keyFile = values["tls-key"];
    if ((certFile === undefined) !== (keyFile === undefined)) {
      throw new UsageError(certFile === undefined ? "--tls-cert" : "--tls-key", "--tls-cert and --tls-key go together");
    }
    const readPem = (flag: string, file: string): string => {
      try {
        return readFileSync(file, "utf8");
      } catch (e) {
        throw new UsageError(flag, `cannot read ${flag} ${JSON.stringify(file)}: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
      }
    };
    const tls = certFile !== undefined && keyFile !== undefined ? { cert: readPem("--tls-cert", certFile), key: readPem("--tls-key", keyFile) } : undefined;
    const logger = createLogger({ level: values["log-level"] ?? "info", name: "shardcar-devapi", destination: io.stderr });

    const api = await startDevApi({
      port,
      gate,
      watchHistory,
      bookmarkIntervalMs,
      logger,
      requireToken: values["require-token"] === true,
      ...(values.host !== undefined ? { host: values.host } : {}),
      ...(tls !== undefined ? { tls } : {}),
    });
    try {
      if (seed > 0) seedPods(api, { count: seed, namespaces, ...(podBytes !== undefined ? { podBytes } : {}) });
      io.stdout.write(`${api.url}\n`);
      logger.info({ url: api.url, gate, pods: api.store.count("pods") }, "devapi listening");
      if (!io.signal.aborted) await new Promise<void>((resolve) => io.signal.addEventListener("abort", () => resolve(), { once: true }));
    } finally {
      await api.close();
    }
    return 0;
  },
};
