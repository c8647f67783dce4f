/**
 * Forwards one request to a plain-HTTP test server and streams its answer
 * back: the half of a loopback front (an APF stand-in, a review stub) that
 * does not change what passes through.
 */
import { request, type IncomingMessage, type ServerResponse } from "node:http";

export function relayTo(target: URL): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    const up = request({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers }, (r) => {
      res.writeHead(r.statusCode ?? 502, r.headers);
      r.pipe(res);
    });
    up.on("error", () => res.destroy());
    res.on("close", () => up.destroy());
    req.pipe(up);
  };
}
