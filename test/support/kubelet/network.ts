/**
 * The node's side of the pod network (see sandbox.ts): dialling an address
 * inside the pod, node-side listeners that forward into it (a port-forward,
 * or a Service's endpoint), and the egress sockets through which the pod
 * reaches 127.0.0.1 ports of the node.
 */
import { connect, createServer, type Server, type Socket } from "node:net";
import { rmSync } from "node:fs";
import { join } from "node:path";

/** A stream to `host:port` inside the pod whose directory is `dir`; rejects with the pod's reason. */
export function dialPod(dir: string, host: string, port: number, timeoutMs = 5000): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect({ path: join(dir, "net", "dial.sock") });
    const timer = setTimeout(() => {
      s.destroy();
      reject(new Error(`dial ${host}:${port} in the pod: no answer within ${timeoutMs} ms`));
    }, timeoutMs);
    let head = Buffer.alloc(0);
    const onData = (chunk: Buffer): void => {
      head = Buffer.concat([head, chunk]);
      const nl = head.indexOf(10);
      if (nl < 0) return;
      s.off("data", onData);
      clearTimeout(timer);
      const line = head.subarray(0, nl).toString("utf8");
      if (line !== "OK") {
        s.destroy();
        reject(new Error(`dial ${host}:${port} in the pod: ${line.replace(/^ERR /, "")}`));
        return;
      }
      s.pause();
      const rest = head.subarray(nl + 1);
      if (rest.length > 0) s.unshift(rest);
      resolve(s);
    };
    s.on("data", onData);
    s.once("error", (e) => {
      clearTimeout(timer);
      reject(new Error(`dial ${host}:${port} in the pod: ${e.message}`));
    });
    s.write(`${host}:${port}\n`);
  });
}

/** Pipes two streams into each other; either ending or failing ends both. */
export function splice(a: Socket, b: Socket): void {
  a.pipe(b);
  b.pipe(a);
  const end = (): void => {
    a.destroy();
    b.destroy();
  };
  for (const s of [a, b]) {
    s.on("error", end);
    s.on("close", end);
  }
}

/**
 * A node-side 127.0.0.1 listener bound now (port 0), whose connections go to
 * `host:port` of whatever pod is routed to it, or are reset while none is:
 * a Service with its endpoint, or without one.
 */
export class NodePort {
  readonly server: Server;
  readonly #open = new Set<Socket>();
  #route: { dir: string; host: string; port: number } | undefined;
  private constructor(server: Server) {
    this.server = server;
  }
  static async open(): Promise<NodePort> {
    const server = createServer();
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => resolve());
    });
    const np = new NodePort(server);
    server.on("connection", (c) => np.#accept(c));
    return np;
  }
  get port(): number {
    const a = this.server.address();
    return typeof a === "object" && a !== null ? a.port : 0;
  }
  route(dir: string, host: string, port: number): void {
    this.#route = { dir, host, port };
  }
  unroute(): void {
    this.#route = undefined;
  }
  #accept(c: Socket): void {
    this.#open.add(c);
    c.once("close", () => this.#open.delete(c));
    c.on("error", () => c.destroy());
    const r = this.#route;
    if (r === undefined) {
      c.resetAndDestroy();
      return;
    }
    c.pause();
    dialPod(r.dir, r.host, r.port).then(
      (up) => splice(c, up),
      () => c.resetAndDestroy(),
    );
  }
  close(): Promise<void> {
    for (const c of this.#open) c.destroy();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/** Serves `<dir>/net/egress-PORT.sock` by connecting to 127.0.0.1:PORT on the node. */
export async function serveEgress(dir: string, port: number): Promise<Server> {
  const path = join(dir, "net", `egress-${port}.sock`);
  rmSync(path, { force: true });
  const server = createServer((c) => {
    c.pause();
    const up = connect({ host: "127.0.0.1", port });
    up.once("connect", () => splice(up, c));
    up.once("error", () => c.destroy());
    c.on("error", () => up.destroy());
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(path, () => resolve());
  });
  return server;
}
