/**
 * What every fault test sets up: N static shards of the pods, each a real
 * client-node informer behind its own shardcar proxy (in-process, or a
 * `shardcar proxy` child process where the fault is the process itself),
 * optionally a {@link FaultLink} between the proxies and the apiserver, and a
 * {@link Witness} on every informer. And what every fault test ends with:
 * each cache exactly its shard of the server's own list, and no controller
 * ever handed an object outside its shard.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Test } from "tap";
import { silentLogger } from "../../../src/log.ts";
import { StaticOwnership } from "../../../src/shard/ownership.ts";
import { startProxy, type RunningProxy } from "../../../src/proxy/run.ts";
import { makeUpstream } from "../../../src/proxy/serving/upstream.ts";
import type { Range } from "../../../src/shard/range.ts";
import { parseResources, parseShardSpec, staticRanges } from "../../../src/shard/spec.ts";
import { createLocalCa } from "../../../src/pki/ca.ts";
import { brokenProxyOptions } from "../broken-proxy.ts";
import { startClientGoController, writeKubeconfig, type ClientGoController } from "../client-go-controller.ts";
import { startController, type Controller, type ControllerOptions } from "../controller.ts";
import { FaultLink } from "../fault-link.ts";
import { listAll } from "../http.ts";
import { ProxyProcess } from "../proxy-process.ts";
import { expectedShard, ident, inShard, setDiff, setsEqual } from "../shard-sets.ts";
import { eventually } from "../wait.ts";
import { Witness } from "../witness.ts";
import type { FaultServer } from "./servers.ts";

/** Per-controller options a scenario may add to one shard. */
export type ControllerExtras = Pick<ControllerOptions, "awaitStart" | "pageSize" | "beforePage">;

/** A proxy under test, whichever way it runs. */
export interface ShardProxyHandle {
  readonly url: string;
  readonly caPem: string;
  /** The child process, when it runs as one. */
  readonly process?: ProxyProcess;
  /** The in-process proxy, when it runs as one. */
  readonly running?: RunningProxy;
  close(): Promise<void>;
}

export interface Shard {
  readonly name: string;
  readonly ranges: readonly Range[];
  readonly proxy: ShardProxyHandle;
  controller: Controller | undefined;
}

/** A client-go informer controller (test/support/client-go/) on a shard of its own, behind its own proxy. */
export interface GoShard {
  readonly name: string;
  readonly ranges: readonly Range[];
  readonly proxy: ShardProxyHandle;
  readonly controller: ClientGoController;
}

export interface RigOptions {
  readonly shards: number;
  /** `process`: each proxy is a `shardcar proxy` child; default in-process. */
  readonly proxies?: "in-process" | "process";
  /** Put a {@link FaultLink} between the proxies and the server. */
  readonly link?: boolean;
  /** Passed to every controller. */
  readonly controller?: Pick<ControllerOptions, "watchTimeoutMs" | "restartDelayMs" | "awaitStart">;
  /** Start the controllers now (default true); otherwise call {@link FaultRig.startControllers}. */
  readonly startControllers?: boolean;
  /**
   * The client-go controller's binary: one more controller, client-go's
   * reflector with its defaults (protobuf, watch-list), on shard 1's ranges
   * behind its own proxy. Its cache counts in {@link FaultRig.exact}; being
   * another process, it has no witness (its final cache is checked).
   */
  readonly clientGo?: string;
}

async function inProcessProxy(upstream: string, server: FaultServer, ranges: readonly Range[]): Promise<ShardProxyHandle> {
  const now = new Date();
  const ca = await createLocalCa("shardcar-fault", now, 24 * 3600_000);
  const tls = await ca.issue({ commonName: "127.0.0.1", names: ["127.0.0.1", "localhost"], now, validityMs: 24 * 3600_000 });
  const running = await startProxy({
    listen: { host: "127.0.0.1", port: 0 },
    tls,
    upstream: makeUpstream(upstream, server.caPem),
    resources: parseResources("pods"),
    ownership: new StaticOwnership(ranges),
    fallback: "filter",
    logger: silentLogger(),
    ...brokenProxyOptions(),
  });
  return { url: running.url, caPem: ca.certPem, running, close: () => running.close() };
}

/** `ns/name@uid` of what a client-go controller caches (unreachable while it restarts: empty). */
async function goCache(g: GoShard): Promise<Set<string>> {
  const { items } = await g.controller.objects().catch(() => ({ items: [] as const }));
  return new Set(items.map((o) => `${o.key}@${o.uid}`));
}

export class FaultRig {
  readonly server: FaultServer;
  readonly link: FaultLink | undefined;
  readonly witness = new Witness();
  readonly shards: Shard[] = [];
  readonly goShards: GoShard[] = [];
  readonly #controllerOpts: RigOptions["controller"];

  private constructor(server: FaultServer, link: FaultLink | undefined, controllerOpts: RigOptions["controller"]) {
    this.server = server;
    this.link = link;
    this.#controllerOpts = controllerOpts;
  }

  /** Starts the proxies (and controllers); everything is stopped at `t`'s teardown, the server too. */
  static async start(t: Test, server: FaultServer, opts: RigOptions): Promise<FaultRig> {
    const link = opts.link === true ? await FaultLink.start(server.url) : undefined;
    const rig = new FaultRig(server, link, opts.controller);
    t.teardown(async () => {
      await rig.stop();
      await server.stop();
    });
    for (let i = 0; i < opts.shards; i++) await rig.addShard(i, opts.shards, opts.proxies ?? "in-process");
    if (opts.startControllers !== false) await rig.startControllers();
    if (opts.clientGo !== undefined) await rig.#addClientGo(opts.clientGo, 1, opts.shards);
    return rig;
  }

  async #addClientGo(binary: string, i: number, n: number): Promise<void> {
    const ranges = staticRanges(parseShardSpec(`${i}/${n}`)) ?? [];
    const proxy = await inProcessProxy(this.link?.url ?? this.server.url, this.server, ranges);
    const dir = mkdtempSync(join(tmpdir(), "shardcar-fault-client-go-"));
    const caFile = join(dir, "proxy-ca.pem");
    writeFileSync(caFile, proxy.caPem);
    const controller = await startClientGoController({ binary, kubeconfig: writeKubeconfig(dir, proxy.url, caFile, this.server.token) });
    this.goShards.push({
      name: `client-go-${i}`,
      ranges,
      proxy: { ...proxy, close: () => proxy.close().then(() => rmSync(dir, { recursive: true, force: true })) },
      controller,
    });
  }

  /**
   * Adds shard `i` of `n` with its own proxy (through the link, if any);
   * its controller starts with {@link startControllers}, or at once when
   * `start` is given (for a shard added mid-test).
   */
  async addShard(i: number, n: number, proxies: "in-process" | "process", start?: ControllerExtras): Promise<Shard> {
    const spec = `${i}/${n}`;
    const ranges = staticRanges(parseShardSpec(spec)) ?? [];
    const upstream = this.link?.url ?? this.server.url;
    const name = n === 1 ? `all-${this.shards.length}` : `shard-${i}${this.shards.some((s) => s.name === `shard-${i}`) ? `-${this.shards.length}` : ""}`;
    const proxy =
      proxies === "process"
        ? await ProxyProcess.start({ name, upstream, ...(this.server.caFile === undefined ? {} : { upstreamCaFile: this.server.caFile }), resources: "pods", shards: spec }).then(
            (p): ShardProxyHandle => ({ url: p.url, caPem: p.caPem, process: p, close: () => p.stop() }),
          )
        : await inProcessProxy(upstream, this.server, ranges);
    const shard: Shard = { name, ranges, proxy, controller: undefined };
    this.shards.push(shard);
    if (start !== undefined) await this.#startController(shard, start);
    return shard;
  }

  /** Starts one informer per shard that has none yet, each behind its own proxy, with the witness on it. */
  async startControllers(): Promise<void> {
    await Promise.all(this.shards.filter((s) => s.controller === undefined).map((s) => this.#startController(s, {})));
  }

  async #startController(s: Shard, extra: ControllerExtras): Promise<void> {
    s.controller = await startController({
      name: s.name,
      server: s.proxy.url,
      caPem: s.proxy.caPem,
      token: this.server.token,
      witness: { witness: this.witness, ranges: () => s.ranges },
      ...this.#controllerOpts,
      ...extra,
    });
  }

  /** The `shardcar proxy` process of shard `s`; throws if its proxy runs in-process. */
  static processOf(s: Shard): ProxyProcess {
    if (s.proxy.process === undefined) throw new Error(`${s.name}'s proxy is not a process`);
    return s.proxy.process;
  }

  /** The controller of shard `s`; throws if it was not started. */
  static controllerOf(s: Shard): Controller {
    if (s.controller === undefined) throw new Error(`${s.name} has no controller`);
    return s.controller;
  }

  /** Whether every cache now holds exactly its shard of the server's own list (one LIST of the server per call). */
  async exact(): Promise<boolean> {
    const { items } = await listAll(this.server.target, "/api/v1/pods");
    const want = (ranges: readonly Range[]): Set<string> => new Set(items.filter((o) => inShard(o, ranges, "uid")).map(ident));
    if (!this.shards.every((s) => setsEqual(FaultRig.controllerOf(s).idents(), want(s.ranges)))) return false;
    for (const g of this.goShards) if (!setsEqual(await goCache(g), want(g.ranges))) return false;
    return true;
  }

  /** Waits until {@link exact}; returns whether it got there within `timeoutMs`. */
  waitExact(timeoutMs: number): Promise<boolean> {
    return eventually(() => this.exact().catch(() => false), timeoutMs, 250);
  }

  /** Relists made by all controllers so far. */
  lists(): number {
    return this.shards.reduce((n, s) => n + (s.controller?.lists() ?? 0), 0);
  }

  /**
   * The two claims every fault test ends with: each cache is exactly its
   * shard (after waiting up to `timeoutMs` for it), and no informer was
   * ever handed an object outside its shard.
   */
  async assertExactAndNeverOutOfRange(t: Test, timeoutMs: number): Promise<void> {
    const t0 = Date.now();
    const settled = await this.waitExact(timeoutMs);
    t.ok(settled, `every cache converged to its exact shard (after ${Date.now() - t0} ms; at most ${timeoutMs} ms)`);
    for (const s of this.shards) {
      const want = await expectedShard(this.server.target, "/api/v1/pods", s.ranges, "uid");
      t.same(setDiff(FaultRig.controllerOf(s).idents(), want), { missing: [], extra: [] }, `${s.name} holds exactly its shard (${want.size} pods)`);
    }
    for (const g of this.goShards) {
      const want = await expectedShard(this.server.target, "/api/v1/pods", g.ranges, "uid");
      t.same(setDiff(await goCache(g), want), { missing: [], extra: [] }, `${g.name} (a client-go informer) holds exactly its shard (${want.size} pods)`);
    }
    t.same(this.witness.outOfRange.slice(0, 10), [], `no informer was ever handed an object outside its shard (${this.witness.total()} handler calls checked, ${this.witness.outOfRange.length} out of range)`);
  }

  async stop(): Promise<void> {
    await Promise.all(this.shards.map((s) => (s.controller === undefined ? Promise.resolve() : s.controller.stop())));
    await Promise.all(this.goShards.map((g) => g.controller.stop()));
    await Promise.all([...this.shards, ...this.goShards].map((s) => s.proxy.close()));
    await this.link?.close();
  }
}
