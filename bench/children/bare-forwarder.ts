/**
 * The floor for a Node proxy: a forwarder that does nothing but
 * `http.request` to the upstream with a keep-alive agent and pipe the
 * response back — no classification, no rewriting, no filtering, no
 * metrics. Run as its own process next to `shardcar proxy`, it separates
 * what Node's HTTP stack costs per extra hop from what shardcar adds.
 *
 *   node bench/children/bare-forwarder.ts <upstream-url>
 * Prints `listening on http://127.0.0.1:PORT`.
 */
import { Agent, createServer, request } from "node:http";

if (import.meta.main) {
  const upstream = new URL(process.argv[2] ?? "http://127.0.0.1:8080");
  const agent = new Agent({ keepAlive: true });
  const server = createServer((req, res) => {
    const up = request({ agent, host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers }, (ur) => {
      res.writeHead(ur.statusCode ?? 502, ur.headers);
      ur.pipe(res);
    });
    up.on("error", () => res.destroy());
    req.pipe(up);
  });
  server.listen(0, "127.0.0.1", () => {
    const a = server.address();
    process.stdout.write(`listening on http://127.0.0.1:${typeof a === "object" && a !== null ? a.port : 0}\n`);
  });
  process.on("SIGTERM", () => {
    server.close();
    server.closeAllConnections();
    agent.destroy();
  });
}
