/**
 * A loopback TCP balancer standing in for a Service and kube-proxy in front
 * of the manager replicas (bench/macro/s3-write-path.ts): each new
 * connection goes to the next backend, round robin, and stays there, as
 * kube-proxy balances connections, never requests. Bytes pass untouched, so
 * TLS runs end to end between the apiserver and a manager.
 *
 * It can also **stall**: every byte a backend sends is held for `ms` before
 * it goes on, new connections' handshakes included, which is what a manager
 * that answers after `ms` looks like from the apiserver. With a stall longer
 * than the webhook's `timeoutSeconds` the apiserver's call times out, and the
 * write goes on under `failurePolicy: Ignore`. No knob in the manager is
 * needed for that, so production code has none.
 */
import { connect, createServer, type Server, type Socket } from "node:net";

export interface BalancerStats {
  /** Connections accepted, per backend port, since start (or the last {@link TcpBalancer.resetStats}). */
  readonly connections: Readonly<Record<number, number>>;
  /** Connections open now. */
  readonly open: number;
}

export class TcpBalancer {
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();
  #backends: readonly number[] = [];
  #next = 0;
  #stallMs = 0;
  #connections = new Map<number, number>();
  readonly port: number;

  private constructor(server: Server, port: number) {
    this.#server = server;
    this.port = port;
  }

  /** Listens on a free loopback port; no backends yet (connections are refused until {@link setBackends}). */
  static async start(): Promise<TcpBalancer> {
    const holder: { b?: TcpBalancer } = {};
    const server = createServer({ noDelay: true }, (client) => holder.b?.accept(client));
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => resolve());
    });
    const addr = server.address();
    holder.b = new TcpBalancer(server, typeof addr === "object" && addr !== null ? addr.port : 0);
    return holder.b;
  }

  /** Loopback ports to balance over, from the next connection on; `drop` also ends the open ones (the apiserver then reconnects and is balanced afresh). */
  setBackends(ports: readonly number[], drop = true): void {
    this.#backends = [...ports];
    this.#next = 0;
    if (drop) this.dropAll();
  }

  /**
   * Hold every byte from a backend for `ms` (0: pass at once). Open
   * connections are ended, so that no connection carries bytes of both
   * kinds (a held chunk would otherwise be overtaken by a later one).
   */
  stall(ms: number): void {
    this.#stallMs = ms;
    this.dropAll();
  }

  /** Ends every open connection (both sides). */
  dropAll(): void {
    for (const s of this.#sockets) s.destroy();
    this.#sockets.clear();
  }

  stats(): BalancerStats {
    return { connections: Object.fromEntries(this.#connections), open: this.#sockets.size / 2 };
  }

  resetStats(): void {
    this.#connections = new Map();
  }

  accept(client: Socket): void {
    const port = this.#backends[this.#next % Math.max(1, this.#backends.length)];
    this.#next++;
    if (port === undefined) {
      client.destroy();
      return;
    }
    this.#connections.set(port, (this.#connections.get(port) ?? 0) + 1);
    const upstream = connect({ host: "127.0.0.1", port, noDelay: true });
    this.#sockets.add(client);
    this.#sockets.add(upstream);
    const close = (): void => {
      client.destroy();
      upstream.destroy();
      this.#sockets.delete(client);
      this.#sockets.delete(upstream);
    };
    client.on("error", close).on("close", close);
    upstream.on("error", close).on("close", close);
    // Towards the backend: as it comes, with backpressure.
    client.pipe(upstream);
    // Towards the client: held for the stall, in order. A stalled chunk's
    // timer fires after every earlier one (same delay, FIFO timers).
    upstream.on("data", (chunk: Buffer) => {
      const ms = this.#stallMs;
      if (ms === 0) {
        if (!client.write(chunk)) {
          upstream.pause();
          client.once("drain", () => upstream.resume());
        }
        return;
      }
      setTimeout(() => {
        if (!client.destroyed) client.write(chunk);
      }, ms).unref();
    });
    upstream.on("end", () => {
      const ms = this.#stallMs;
      if (ms === 0) client.end();
      else setTimeout(() => client.end(), ms).unref();
    });
  }

  async close(): Promise<void> {
    this.dropAll();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}
