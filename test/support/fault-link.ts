/**
 * A TCP man-in-the-middle between the proxy and the apiserver, for faults
 * that happen on the wire: an upstream that stops sending after N bytes
 * (mid-list, mid-watch), a stall that ends or a connection cut, and a view of
 * backpressure (is the proxy still reading what the server sends?).
 *
 * It relays bytes without looking at them (TLS to realapi passes through
 * untouched), and it relays with backpressure itself: when the proxy does not
 * read, the link stops reading from the server, so the server's socket fills
 * as it would with no link in between. It never holds more than one chunk per
 * direction and connection.
 */
import { connect, createServer, type Server, type Socket } from "node:net";

export interface LinkConnection {
  readonly id: number;
  /** Bytes the server sent that the link handed to the proxy. */
  down: number;
  /** Bytes the proxy sent to the server. */
  up: number;
  /** Set while the link holds server bytes back because of a stall. */
  stalled: boolean;
  /** Since when (ms) the proxy's side has not drained what the link wrote to it; undefined while it reads. */
  proxyNotReadingSince: number | undefined;
  /** Either side closed. */
  closed: boolean;
  /** The server's side has closed (what the link still has for the proxy goes out first). */
  upstreamClosed: boolean;
  /** Bytes the link wrote towards the proxy that the proxy's socket has not taken yet. */
  readonly queuedToProxy: number;
}

interface Conn extends LinkConnection {
  readonly client: Socket;
  readonly upstream: Socket;
  /** Bytes still to forward before stalling; undefined = no stall armed. */
  budget: number | undefined;
  held: Buffer[];
}

export class FaultLink {
  readonly #server: Server;
  readonly #conns = new Set<Conn>();
  readonly #all: Conn[] = [];
  #nextId = 0;
  /** Stall armed for the next connections: each stalls after this many server bytes. */
  #armed: { afterBytes: number; count: number } | undefined;
  readonly url: string;

  private constructor(server: Server, url: string) {
    this.#server = server;
    this.url = url;
  }

  /** A link to `target` (`http(s)://host:port`); its own URL keeps `target`'s scheme. */
  static async start(target: string): Promise<FaultLink> {
    const t = new URL(target);
    const port = Number(t.port || (t.protocol === "https:" ? 443 : 80));
    const holder: { link?: FaultLink } = {};
    const server = createServer((client) => holder.link?.accept(client, t.hostname, port));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const addr = server.address();
    const own = typeof addr === "object" && addr !== null ? addr.port : 0;
    holder.link = new FaultLink(server, `${t.protocol}//127.0.0.1:${own}`);
    return holder.link;
  }

  /** Connections ever accepted, oldest first. */
  connections(): readonly LinkConnection[] {
    return this.#all;
  }

  /** Connections open now. */
  open(): LinkConnection[] {
    return [...this.#conns];
  }

  /** The next `count` connections stall once the server has sent them `afterBytes`. */
  stallNext(afterBytes: number, count = 1): void {
    this.#armed = { afterBytes, count };
  }

  /** Every open connection stalls after `afterBytes` more server bytes (0: at once). */
  stallOpen(afterBytes = 0): void {
    for (const c of this.#conns) {
      c.budget = afterBytes;
      if (afterBytes === 0) c.stalled = true;
    }
  }

  /** Ends every stall: held bytes are delivered and relaying goes on. */
  resume(): void {
    this.#armed = undefined;
    for (const c of this.#conns) {
      c.budget = undefined;
      c.stalled = false;
      const held = c.held.splice(0);
      for (const b of held) this.#toProxy(c, b);
      if (c.upstream.readableEnded) c.client.end();
      else c.upstream.resume();
    }
  }

  /** Cuts every stalled connection (both sides reset), as a broken network path ends. */
  cutStalled(): number {
    let n = 0;
    for (const c of [...this.#conns]) {
      if (!c.stalled) continue;
      n++;
      c.client.resetAndDestroy();
      c.upstream.destroy();
    }
    return n;
  }

  async close(): Promise<void> {
    for (const c of this.#conns) {
      c.client.destroy();
      c.upstream.destroy();
    }
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  private accept(client: Socket, host: string, port: number): void {
    const upstream = connect(port, host);
    let budget: number | undefined;
    if (this.#armed !== undefined) {
      budget = this.#armed.afterBytes;
      if (--this.#armed.count <= 0) this.#armed = undefined;
    }
    const c: Conn = {
      id: this.#nextId++,
      down: 0,
      up: 0,
      stalled: false,
      proxyNotReadingSince: undefined,
      closed: false,
      upstreamClosed: false,
      get queuedToProxy() {
        return client.writableLength;
      },
      client,
      upstream,
      budget,
      held: [],
    };
    this.#conns.add(c);
    this.#all.push(c);
    const closeBoth = (): void => {
      c.closed = true;
      this.#conns.delete(c);
      client.destroy();
      upstream.destroy();
    };
    client.on("data", (b: Buffer) => {
      c.up += b.length;
      if (!upstream.write(b)) {
        client.pause();
        upstream.once("drain", () => client.resume());
      }
    });
    upstream.on("data", (b: Buffer) => {
      if (c.stalled) {
        c.held.push(b);
        upstream.pause();
        return;
      }
      if (c.budget !== undefined && b.length >= c.budget) {
        const now = b.subarray(0, c.budget);
        c.held.push(b.subarray(c.budget));
        c.budget = 0;
        c.stalled = true;
        upstream.pause();
        if (now.length > 0) this.#toProxy(c, now);
        return;
      }
      if (c.budget !== undefined) c.budget -= b.length;
      this.#toProxy(c, b);
    });
    client.on("end", () => upstream.end());
    upstream.on("end", () => {
      if (c.held.length === 0) client.end();
    });
    client.on("close", closeBoth);
    for (const s of [client, upstream]) s.on("error", closeBoth);
    // A server that closes after a clean end, with nothing held by a stall,
    // has cut nothing: the proxy's side was ended and closes once the bytes
    // still queued for it are out. Destroying it now would drop them while
    // the proxy saw a clean end (a response cut short near its end).
    upstream.on("close", () => {
      c.upstreamClosed = true;
      if (!upstream.readableEnded || c.held.length > 0) closeBoth();
    });
  }

  #toProxy(c: Conn, b: Buffer): void {
    c.down += b.length;
    if (c.client.write(b)) return;
    // The proxy is not keeping up: stop reading from the server until it drains.
    c.proxyNotReadingSince ??= Date.now();
    c.upstream.pause();
    c.client.once("drain", () => {
      c.proxyNotReadingSince = undefined;
      if (!c.stalled) c.upstream.resume();
    });
  }
}
