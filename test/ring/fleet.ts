/**
 * A ring of real `shardcar proxy --shards ring` processes (their RSS, heap,
 * descriptors and sockets are their own), each with a client-node pod
 * informer behind it, against devapi with the ring's coordinator in-process
 * (RingEnv, harness.ts). Members join and leave by name, as StatefulSet pods
 * scaled up and down do, and can be SIGKILLed and restarted on the same port,
 * as a native sidecar restarts. Used by the soak (test/soak) and the ring
 * variant of the proxy-kill fault (test/e2e/fault-proxy-kill.test.ts);
 * test/ring/replicas.ts is the in-process counterpart.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Range } from "../../src/shard/range.ts";
import type { ShardRingStatusJson, TableJson } from "../../src/ring/table.ts";
import { slotsToRanges } from "../../src/shard/table.ts";
import { parseSlots } from "../../src/ring/table.ts";
import { fnv1a64 } from "../../src/shard/hash.ts";
import { contains, union } from "../../src/shard/range.ts";
import { startController, type Controller } from "../support/controller.ts";
import { ProxyProcess } from "../support/proxy-process.ts";
import { ident, setsEqual } from "../support/shard-sets.ts";
import type { Witness } from "../support/witness.ts";
import { NS, RingEnv, SHARDRING_REF } from "./harness.ts";

export interface FleetMember {
  readonly name: string;
  readonly proxy: ProxyProcess;
  readonly controller: Controller;
}

const TOKEN = "soak-member";

export class Fleet {
  readonly env: RingEnv;
  readonly members = new Map<string, FleetMember>();
  readonly #dir: string;
  readonly #kubeconfig: string;
  readonly #stopCoordinator: () => Promise<void>;
  /** Every range each member was ever given, committed or pending (what its proxy may have enforced at some moment). */
  readonly #given = new Map<string, Range[]>();

  private constructor(env: RingEnv, dir: string, stopCoordinator: () => Promise<void>) {
    this.env = env;
    this.#dir = dir;
    this.#stopCoordinator = stopCoordinator;
    env.api.store.watch(SHARDRING_REF, (e) => this.#record((e.object as { status?: Partial<ShardRingStatusJson> }).status));
    this.#kubeconfig = join(dir, "kubeconfig");
    // The sidecar's own identity for its member Lease (never the controller's).
    writeFileSync(
      this.#kubeconfig,
      `apiVersion: v1\nkind: Config\ncurrent-context: soak\ncontexts:\n- name: soak\n  context: {cluster: devapi, user: member}\nclusters:\n- name: devapi\n  cluster:\n    server: ${env.api.url}\nusers:\n- name: member\n  user:\n    token: ${TOKEN}\n`,
    );
  }

  /** devapi with `pods` pods in `namespaces`, and a running coordinator for ring `ring`. */
  static async start(opts: { ring: string; pods: number; namespaces: readonly string[] }): Promise<Fleet> {
    const env = await RingEnv.start(opts.ring);
    const { seedPods } = await import("../../src/devapi/index.ts");
    seedPods(env.api, { count: opts.pods, namespaces: opts.namespaces });
    const coordinator = env.startCoordinator();
    return new Fleet(env, mkdtempSync(join(tmpdir(), "shardcar-soak-")), coordinator.stop);
  }

  /**
   * A member joins: its proxy process starts (it joins the ring itself),
   * then its controller; with `witness`, every object the controller is
   * handed is checked against the ranges the member was ever given.
   */
  async join(name: string, witness?: Witness): Promise<FleetMember> {
    const proxy = await ProxyProcess.start({
      name,
      upstream: this.env.api.url,
      resources: "pods",
      shards: "ring",
      args: ["--ring", this.env.ring, "--pod-name", name, "--pod-namespace", NS, "--kubeconfig", this.#kubeconfig],
      gcBeforeSample: true,
    });
    // The proxy holds the first LIST until the ring gives it ranges: do not wait for it.
    const controller = await startController({
      name,
      server: proxy.url,
      caPem: proxy.caPem,
      token: `controller-${name}`,
      awaitStart: false,
      ...(witness === undefined ? {} : { witness: { witness, ranges: () => this.givenRanges(name) } }),
    });
    const m = { name, proxy, controller };
    this.members.set(name, m);
    return m;
  }

  /** A member leaves gracefully (SIGTERM: the proxy leaves the ring, then exits), then its controller stops. */
  async leave(name: string): Promise<void> {
    const m = this.members.get(name);
    if (m === undefined) return;
    this.members.delete(name);
    await m.proxy.stop();
    await m.controller.stop();
  }

  /** SIGKILLs a member's proxy process (its controller lives on, its Lease is not released). */
  async kill(name: string): Promise<void> {
    await this.members.get(name)?.proxy.kill("SIGKILL");
  }

  /** Starts a killed member's proxy again, same pod name and port: it takes over its own Lease. */
  async restart(name: string): Promise<void> {
    await this.members.get(name)?.proxy.restart();
  }

  /**
   * The union of every range `name` was given so far, committed or pending
   * (recorded at every write of the ShardRing): in overlap mode a member
   * enforces intermediate tables, so an object it delivers is in one of
   * them, but may reach the controller just after the next one.
   */
  givenRanges(name: string): readonly Range[] {
    return this.#given.get(name) ?? [];
  }

  #record(status: Partial<ShardRingStatusJson> | undefined): void {
    const slotCount = status?.slotCount ?? 256;
    const tables: Array<TableJson | undefined> = [status?.committed, status?.pending];
    for (const table of tables) {
      for (const entry of table?.members ?? []) {
        const slots = parseSlots(entry.slots, slotCount);
        if (slots.ok) this.#given.set(entry.name, union(this.#given.get(entry.name) ?? [], slotsToRanges(slots.value, slotCount)));
      }
    }
  }

  /** Each member's committed ranges, once the ring committed exactly the live members and has nothing pending. */
  committedRanges(): Map<string, readonly Range[]> | undefined {
    const st = this.env.ringStatus();
    if (st?.committed === undefined || st.pending !== undefined) return undefined;
    const names = st.committed.members.map((m) => m.name).sort();
    if (names.join(",") !== [...this.members.keys()].sort().join(",")) return undefined;
    const out = new Map<string, readonly Range[]>();
    for (const e of st.committed.members) {
      const slots = parseSlots(e.slots, st.slotCount ?? 256);
      if (!slots.ok) return undefined;
      out.set(e.name, slotsToRanges(slots.value, st.slotCount ?? 256));
    }
    return out;
  }

  /** Whether the ring settled on the live members and every cache holds exactly its member's committed ranges of the store. */
  exact(): boolean {
    const ranges = this.committedRanges();
    if (ranges === undefined) return false;
    const pods = this.env.api.store.list("pods");
    return [...this.members.values()].every((m) => {
      const r = ranges.get(m.name) ?? [];
      return setsEqual(m.controller.idents(), new Set(pods.filter((o) => contains(r, fnv1a64(o.metadata?.uid ?? ""))).map(ident)));
    });
  }

  async stop(): Promise<void> {
    for (const m of this.members.values()) {
      await m.controller.stop();
      await m.proxy.kill("SIGKILL");
      await m.proxy.stop();
    }
    this.members.clear();
    await this.#stopCoordinator();
    await this.env.stop();
    rmSync(this.#dir, { recursive: true, force: true });
  }
}
