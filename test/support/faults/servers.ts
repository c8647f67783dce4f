/**
 * The apiservers the fault tests run against, behind one face: devapi (the
 * fast suite) and a real k8s.io/apiserver with etcd (`../shared/realapi`,
 * the real-server lane). A fault that needs the server itself to misbehave
 * (a restart, a compaction) gets a private realapi on its own run directory,
 * stopped at the end; the others use the lane's shared server.
 */
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { seedPods, startDevApi, type DevApi, type DevStore, type GateMode } from "../../../src/devapi/index.ts";
import { createLocalCa } from "../../../src/pki/ca.ts";
import { callJson, inParallel, waitUntil, type KubeObject, type Target } from "../http.ts";

const run = promisify(execFile);

export interface FaultServer {
  readonly kind: "devapi" | "realapi";
  /** The ShardedListAndWatch gate: `off`, the server ignores shard selectors and sends everything. */
  readonly gate: GateMode;
  /** The apiserver's URL, as a proxy is configured with it. */
  readonly url: string;
  /** PEM the server's certificate chains to (https only), and a file with it (for `shardcar proxy`). */
  readonly caPem?: string;
  readonly caFile?: string;
  /** A direct client: the test's own view of the truth, and its writes. */
  readonly target: Target;
  /** The token controllers present (the proxy forwards it). */
  readonly token: string;
  /** The namespaces the seeded pods live in. */
  readonly namespaces: readonly string[];
  /** devapi's store, for bulk writes without HTTP (devapi only; the same writes an HTTP client makes). */
  readonly store?: DevStore;
  /**
   * Stops the apiserver (open lists and watches end, connections are refused),
   * awaits `whileDown`, and starts it again on the same address and data.
   * Undefined where the test may not restart the server (the lane's shared one).
   */
  readonly restart?: (whileDown?: () => Promise<void>) => Promise<void>;
  /**
   * Compacts the history at the current revision, as etcd's compaction does;
   * returns that revision. Undefined where it may not.
   */
  readonly compact?: () => Promise<string>;
  /**
   * Whether watches are served from an in-memory watch cache (realapi, as
   * kube-apiserver): a compaction reaches a resuming watch only once that
   * cache reinitialises, e.g. when the apiserver restarts.
   */
  readonly watchCache: boolean;
  /** Stops what this adapter started. */
  stop(): Promise<void>;
}

/** devapi with `pods` seeded pods; restarts and compacts in-process. `tls`: served over verified TLS, as an apiserver is. */
export async function devapiServer(opts: { gate: GateMode; pods: number; namespaces: readonly string[]; podBytes?: number; bookmarkIntervalMs?: number; tls?: boolean }): Promise<FaultServer & { readonly api: DevApi }> {
  let tls: { key: string; cert: string; caPem: string; caFile: string; dir: string } | undefined;
  if (opts.tls === true) {
    const now = new Date();
    const ca = await createLocalCa("shardcar-test-devapi", now, 24 * 3600_000);
    const leaf = await ca.issue({ commonName: "127.0.0.1", names: ["127.0.0.1", "localhost"], now, validityMs: 24 * 3600_000 });
    const dir = mkdtempSync(join(tmpdir(), "shardcar-devapi-ca-"));
    writeFileSync(join(dir, "ca.crt"), ca.certPem);
    tls = { key: leaf.key, cert: leaf.cert, caPem: ca.certPem, caFile: join(dir, "ca.crt"), dir };
  }
  const api = await startDevApi({ gate: opts.gate, ...(opts.bookmarkIntervalMs === undefined ? {} : { bookmarkIntervalMs: opts.bookmarkIntervalMs }), ...(tls === undefined ? {} : { tls: { key: tls.key, cert: tls.cert } }) });
  seedPods(api, { count: opts.pods, namespaces: opts.namespaces, ...(opts.podBytes === undefined ? {} : { podBytes: opts.podBytes }) });
  return {
    kind: "devapi",
    gate: opts.gate,
    api,
    url: api.url,
    ...(tls === undefined ? {} : { caPem: tls.caPem, caFile: tls.caFile }),
    target: { url: api.url, ...(tls === undefined ? {} : { caPem: tls.caPem }) },
    store: api.store,
    token: "controller-token",
    namespaces: opts.namespaces,
    watchCache: false,
    restart: (whileDown) => api.restart(whileDown),
    compact: () => Promise.resolve(api.store.compact()),
    async stop() {
      await api.close();
      if (tls !== undefined) rmSync(tls.dir, { recursive: true, force: true });
    },
  };
}

/** Where `../shared/realapi` is (SHARDCAR_SHARED, as test/real/run.sh). */
export function realapiKit(): string {
  return resolve(process.env["SHARDCAR_SHARED"] ?? resolve(import.meta.dirname, "../../../../shared"), "realapi");
}

function readEnv(file: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of readFileSync(file, "utf8").split("\n")) {
    const i = line.indexOf("=");
    if (i > 0) out[line.slice(0, i)] = line.slice(i + 1);
  }
  return out;
}

/**
 * A private realapi (own run directory, own ports, own etcd) with `pods`
 * pods, for faults that stop or compact the server. The gate follows the
 * lane's (`REALAPI_GATE_SHARDED`). Always call `stop()`: it runs
 * `stop.sh --clean`.
 */
export async function privateRealapi(opts: { pods: number; namespaces: readonly string[]; podBytes?: number }): Promise<FaultServer> {
  const kit = realapiKit();
  if (!existsSync(join(kit, "start.sh"))) throw new Error(`${kit}/start.sh not found: the real-server kit is not beside the repository`);
  const gate = process.env["REALAPI_GATE_SHARDED"] === "false" ? "off" : "on";
  // Inside the lane's run directory when there is one: if this process dies
  // before its teardown, test/real/run.sh's cleanup still stops the server.
  const dir = mkdtempSync(join(process.env["REALAPI_RUN_DIR"] ?? tmpdir(), "fault-realapi-"));
  const start = async (port?: string): Promise<Record<string, string>> => {
    // start.sh picks free ports and then binds them; on a busy machine
    // another process can take one in between (as test/real/run.sh retries).
    for (let attempt = 1; ; attempt++) {
      try {
        await run(join(kit, "start.sh"), [gate], { env: { ...process.env, REALAPI_RUN_DIR: dir, ...(port === undefined ? {} : { REALAPI_PORT: port }) } });
        return readEnv(join(dir, "env"));
      } catch (e) {
        const why = `${(e as { stderr?: string }).stderr ?? ""}${(e as { stdout?: string }).stdout ?? ""}`;
        if (attempt >= 3 || !why.includes("address already in use")) throw new Error(`start.sh ${gate} failed: ${why.slice(-2000)}`, { cause: e });
      }
    }
  };
  const stopKit = async (clean: boolean): Promise<void> => {
    if (existsSync(join(dir, "env"))) await run(join(kit, "stop.sh"), [dir, ...(clean ? ["--clean"] : [])]);
    if (clean) rmSync(dir, { recursive: true, force: true });
  };
  let env: Record<string, string>;
  try {
    env = await start();
  } catch (e) {
    await stopKit(true).catch(() => undefined);
    throw e;
  }
  const url = env["REALAPI_URL"] ?? "";
  const caFile = env["REALAPI_CA"] ?? "";
  const caPem = readFileSync(caFile, "utf8");
  const token = env["REALAPI_TOKEN"] ?? "";
  const target: Target = { url, token, caPem };
  const namespaces = opts.namespaces;
  const pods: Array<[string, KubeObject]> = [];
  for (let i = 0; i < opts.pods; i++) {
    const ns = namespaces[i % namespaces.length] ?? "default";
    const annotations: Record<string, string> = opts.podBytes === undefined ? {} : { "example.com/pad": "x".repeat(opts.podBytes) };
    pods.push([ns, { apiVersion: "v1", kind: "Pod", metadata: { name: `pod-${String(i).padStart(4, "0")}`, namespace: ns, labels: { app: "fault" }, annotations }, spec: { containers: [{ name: "main", image: "registry.invalid/app:1" }] } }]);
  }
  try {
    await inParallel(pods, 8, ([ns, p]) => callJson(target, "POST", `/api/v1/namespaces/${ns}/pods`, p));
  } catch (e) {
    await stopKit(true).catch(() => undefined);
    throw e;
  }
  const port = new URL(url).port;
  return {
    kind: "realapi",
    gate,
    url,
    caPem,
    caFile,
    target,
    token,
    namespaces,
    watchCache: true,
    async restart(whileDown) {
      await stopKit(false);
      await whileDown?.();
      env = await start(port);
      await waitUntil("the restarted realapi serves pods", () => callJson(target, "GET", "/api/v1/pods?limit=1").then(() => true, () => false), 30_000);
    },
    async compact() {
      const etcd = env["ETCD_URL"] ?? "";
      // etcd's own HTTP gateway (no etcdctl in the kit): the current
      // revision from any range request, then a physical compaction at it.
      const head = await fetchJson<{ header?: { revision?: string } }>(`${etcd}/v3/kv/range`, { key: Buffer.from("/registry").toString("base64"), limit: 1 });
      const revision = head.header?.revision ?? "";
      if (revision === "") throw new Error(`etcd at ${etcd} did not report its revision`);
      await fetchJson(`${etcd}/v3/kv/compaction`, { revision, physical: true });
      return revision;
    },
    stop: () => stopKit(true),
  };
}

async function fetchJson<T = unknown>(url: string, body: unknown): Promise<T> {
  const res = await fetch(url, { method: "POST", body: JSON.stringify(body), headers: { "content-type": "application/json" } });
  const text = await res.text();
  if (!res.ok) throw new Error(`POST ${url}: ${res.status} ${text.slice(0, 300)}`);
  return JSON.parse(text) as T;
}

/** The lane's shared realapi (`npm run test:real` exported its environment); it may not be restarted or compacted. */
export function sharedRealapi(env: { url: string; token: string; caPem: string; caFile: string; gate: "on" | "off" }, namespaces: readonly string[]): FaultServer {
  return { kind: "realapi", gate: env.gate, url: env.url, caPem: env.caPem, caFile: env.caFile, target: { url: env.url, token: env.token, caPem: env.caPem }, token: env.token, namespaces, watchCache: true, stop: () => Promise.resolve() };
}
