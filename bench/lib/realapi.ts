/**
 * The real k8s.io/apiserver kit (`../shared/realapi`) for the benches that
 * need what devapi does not serve (protobuf, for a client-go controller
 * with its defaults): start and stop it by its own scripts, restart it with
 * the other gate on the same data, seed objects over HTTPS, list uids.
 *
 * {@link startRealApi} throws {@link BenchSkipped} when the kit is not
 * built on this machine: a bench that needs it is then skipped with the
 * reason, never passed.
 */
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { Agent, request } from "node:https";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { fileURLToPath } from "node:url";
import { BenchSkipped } from "./bench.ts";

const run = promisify(execFile);
const KIT = fileURLToPath(new URL("../../../shared/realapi/", import.meta.url));

export interface RealApi {
  readonly url: string;
  readonly token: string;
  readonly caFile: string;
  readonly caPem: string;
  readonly runDir: string;
  readonly gate: "on" | "off";
  /** The processes start.sh started, for their CPU and I/O in /proc. */
  readonly pids: { readonly server: number; readonly etcd: number };
}

/**
 * Starts etcd + realapi-server with the gate; `runDir` reuses an earlier
 * run's data (a restart); `extraEnv` adds variables for start.sh (e.g.
 * `REALAPI_WEBHOOK_SERVICES`).
 */
export async function startRealApi(gate: "on" | "off", runDir?: string, extraEnv: Readonly<Record<string, string>> = {}): Promise<RealApi> {
  const cache = process.env["SHARDCAR_REALAPI_CACHE"] ?? join(homedir(), ".cache", "shardcar-realapi");
  if (!existsSync(join(KIT, "start.sh"))) throw new BenchSkipped(`${KIT} is not beside the repository`);
  if (!existsSync(join(cache, "bin", "realapi-server"))) throw new BenchSkipped(`the real API server is not built (${cache}/bin; run ../shared/realapi/setup.sh or npm run test:real once)`);
  const dir = runDir ?? mkdtempSync(join(tmpdir(), "shardcar-bench-realapi-"));
  let stdout = "";
  // start.sh picks free ports, then binds them; on a busy machine another
  // process can take one in between. Its failure path stops what it
  // started, so try again on fresh ports (as test/real/run.sh does).
  for (let attempt = 1; ; attempt++) {
    try {
      stdout = (await run(join(KIT, "start.sh"), [gate], { env: { ...process.env, ...extraEnv, REALAPI_RUN_DIR: dir }, maxBuffer: 1024 * 1024 })).stdout;
      break;
    } catch (e) {
      const stderr = (e as { stderr?: string }).stderr ?? "";
      if (attempt < 3 && stderr.includes("address already in use")) continue;
      if (runDir === undefined) rmSync(dir, { recursive: true, force: true });
      throw e;
    }
  }
  const env = Object.fromEntries(stdout.split("\n").filter((l) => l.includes("=")).map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]));
  const url = env["REALAPI_URL"];
  const token = env["REALAPI_TOKEN"];
  const caFile = env["REALAPI_CA"];
  const server = Number(env["REALAPI_PID"]);
  const etcd = Number(env["ETCD_PID"]);
  if (url === undefined || token === undefined || caFile === undefined) throw new Error(`start.sh printed no REALAPI_URL/TOKEN/CA:\n${stdout}`);
  if (!Number.isInteger(server) || !Number.isInteger(etcd)) throw new Error(`start.sh printed no REALAPI_PID/ETCD_PID:\n${stdout}`);
  return { url, token, caFile, caPem: readFileSync(caFile, "utf8"), runDir: dir, gate, pids: { server, etcd } };
}

/** Stops it (by PID, through stop.sh); `clean` also removes its data. */
export async function stopRealApi(api: RealApi, clean: boolean): Promise<void> {
  await run(join(KIT, "stop.sh"), [api.runDir, ...(clean ? ["--clean"] : [])]);
}

const agents = new WeakMap<RealApi, Agent>();

/** One request over the kit's keep-alive agent (16 sockets), JSON in and out; `contentType` for PATCH. */
export function callRealApi(api: RealApi, method: string, path: string, body?: unknown, contentType = "application/json"): Promise<{ status: number; body: string }> {
  let agent = agents.get(api);
  if (agent === undefined) {
    agent = new Agent({ keepAlive: true, maxSockets: 16, ca: api.caPem });
    agents.set(api, agent);
  }
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(new URL(path, api.url), { method, agent, headers: { authorization: `Bearer ${api.token}`, accept: "application/json", ...(payload === undefined ? {} : { "content-type": contentType }) } }, (res) => {
      const parts: Buffer[] = [];
      res.on("data", (b: Buffer) => parts.push(b));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(parts).toString("utf8") }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(payload);
  });
}

/**
 * Creates ConfigMaps `cm-<from>` … `cm-<to − 1>` of about `bytes` each in
 * `namespace` (existing ones are kept: a 409 counts as done), `concurrency`
 * requests at a time.
 */
export async function seedConfigMaps(api: RealApi, namespace: string, from: number, to: number, bytes: number, concurrency = 16): Promise<void> {
  const ns = await callRealApi(api, "POST", "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: namespace } });
  if (ns.status !== 201 && ns.status !== 409) throw new Error(`creating namespace ${namespace}: HTTP ${ns.status} ${ns.body}`);
  const pad = "x".repeat(Math.max(0, bytes - 300));
  let next = from;
  const worker = async (): Promise<void> => {
    for (let i = next++; i < to; i = next++) {
      const r = await callRealApi(api, "POST", `/api/v1/namespaces/${namespace}/configmaps`, { apiVersion: "v1", kind: "ConfigMap", metadata: { name: `cm-${String(i).padStart(6, "0")}`, labels: { bench: "p5m" } }, data: { index: String(i), payload: pad } });
      if (r.status !== 201 && r.status !== 409) throw new Error(`creating configmap ${i} in ${namespace}: HTTP ${r.status} ${r.body}`);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
}

/** Every ConfigMap's uid in `namespace` (one unsharded JSON list). */
export async function configMapUids(api: RealApi, namespace: string): Promise<string[]> {
  const r = await callRealApi(api, "GET", `/api/v1/namespaces/${namespace}/configmaps`);
  if (r.status !== 200) throw new Error(`listing configmaps in ${namespace}: HTTP ${r.status}`);
  return ((JSON.parse(r.body) as { items?: Array<{ metadata?: { uid?: string } }> }).items ?? []).map((o) => o.metadata?.uid ?? "");
}
