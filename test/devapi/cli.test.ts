import t from "tap";
import { Writable } from "node:stream";
import { main } from "../../src/cli/main.ts";
import type { CommandIO } from "../../src/cli/command.ts";
import { until } from "../support/wait.ts";

function io(signal: AbortSignal = new AbortController().signal): CommandIO & { out: () => string; err: () => string } {
  let out = "";
  let err = "";
  const sink = (add: (s: string) => void) =>
    new Writable({
      write(chunk: Buffer, _enc, cb) {
        add(chunk.toString());
        cb();
      },
    });
  return {
    stdout: sink((s) => (out += s)),
    stderr: sink((s) => (err += s)),
    env: {},
    signal,
    out: () => out,
    err: () => err,
  };
}

const BAD: Array<[string[], string]> = [
  [["--gate", "sometimes"], "--gate"],
  [["--port", "http"], "--port"],
  [["--port", "70000"], "--port"],
  [["--seed-pods", "-1"], "--seed-pods"],
  [["--namespaces", "0"], "--namespaces"],
  [["--bookmark-interval", "soon"], "--bookmark-interval"],
  [["--watch-history", "0"], "--watch-history"],
  [["--tls-cert", "/nonexistent.pem"], "--tls-key"],
  [["--tls-cert", "/nonexistent.pem", "--tls-key", "/nonexistent.key"], "--tls-cert"],
  [["--bogus"], "--bogus"],
];

t.test("bad flags exit 2 with a message naming the flag", async (t) => {
  for (const [argv, flag] of BAD) {
    const x = io();
    t.equal(await main(["devapi", ...argv], x), 2, argv.join(" "));
    t.match(x.err(), flag, `${argv.join(" ")} names ${flag}`);
  }
});

t.test("--help prints usage with examples and exits 0", async (t) => {
  const x = io();
  t.equal(await main(["devapi", "--help"], x), 0);
  t.match(x.out(), /Usage: shardcar devapi/);
  t.match(x.out(), /Examples:\n\s+shardcar devapi --port 8080 --gate on --seed-pods 3000 --namespaces 6/);
  const top = io();
  await main(["--help"], top);
  t.match(top.out(), /devapi/, "listed in shardcar --help");
});

t.test("runs until the signal aborts, serving seeded pods at the printed URL", async (t) => {
  const ac = new AbortController();
  const x = io(ac.signal);
  const done = main(["devapi", "--port", "0", "--gate", "mixed", "--seed-pods", "30", "--namespaces", "3", "--log-level", "silent"], x);
  await until("the printed URL", () => x.out().includes("\n"));
  const url = x.out().trim();
  t.match(url, /^http:\/\/127\.0\.0\.1:\d+$/);
  const body = (await (await fetch(`${url}/api/v1/pods`)).json()) as { items: unknown[] };
  t.equal(body.items.length, 30);
  const ns = (await (await fetch(`${url}/api/v1/namespaces`)).json()) as { items: unknown[] };
  t.equal(ns.items.length, 3);
  ac.abort();
  t.equal(await done, 0);
  await t.rejects(fetch(`${url}/version`), "closed after the signal");
});
