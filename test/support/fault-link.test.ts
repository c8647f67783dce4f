import { createServer, connect, type Socket } from "node:net";
import t from "tap";
import { FaultLink } from "./fault-link.ts";
import { until } from "./wait.ts";

/**
 * A server that sends a response and closes its connection at once, while
 * the proxy is not reading (its kernel buffer is full and the link has some
 * bytes queued for it, fewer than its socket's high-water mark, so the link
 * still reads the server and sees the end). Once the proxy reads again it
 * must get every byte, as it would with no link in between.
 */
t.test("a response whose server closes right after it reaches a proxy that reads it late, whole", async (t) => {
  let serverSide: Socket | undefined;
  const server = createServer((s) => {
    serverSide = s;
    s.on("error", () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.teardown(() => server.close());
  const port = (server.address() as { port: number }).port;
  const link = await FaultLink.start(`http://127.0.0.1:${port}`);
  t.teardown(() => link.close());

  const proxySide = connect(Number(new URL(link.url).port), "127.0.0.1");
  proxySide.pause();
  await until("the link relays a connection", () => serverSide !== undefined && link.connections().length === 1);
  const from = serverSide as Socket;
  const conn = link.connections()[0];
  if (conn === undefined) throw new Error("no link connection");

  // Small writes until the proxy's kernel buffers are full and the link starts queueing.
  let sent = 0;
  while (conn.queuedToProxy === 0) {
    if (sent > 256 * 1024 * 1024) throw new Error(`the link never queued anything for the proxy (${sent} bytes sent)`);
    from.write(Buffer.alloc(4096, 0x78));
    sent += 4096;
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  from.end(Buffer.alloc(1165, 0x79));
  sent += 1165;
  await until("the link sees the server's side close", () => conn.upstreamClosed);

  let got = 0;
  proxySide.on("data", (b: Buffer) => {
    got += b.length;
  });
  const ended = await new Promise<string>((resolve) => {
    proxySide.once("end", () => resolve("end"));
    proxySide.once("error", (e) => resolve(e.message));
    proxySide.resume();
  });
  t.equal(ended, "end", "the proxy's side ends cleanly");
  t.equal(got, sent, `the proxy gets all ${sent} bytes the server sent`);
  proxySide.destroy();
});
