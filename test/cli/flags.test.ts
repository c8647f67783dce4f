/**
 * Bad flags exit 2 with a message that names the flag and the value, for
 * every command that takes them. Runs `main` in-process.
 */
import t from "tap";
import { Writable } from "node:stream";
import { main } from "../../src/cli/main.ts";

async function run(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = "";
  let err = "";
  const sink = (f: (s: string) => void): Writable => new Writable({ write(c: Buffer, _e, cb) { f(c.toString()); cb(); } });
  const ac = new AbortController();
  ac.abort();
  const code = await main(argv, { stdout: sink((s) => (out += s)), stderr: sink((s) => (err += s)), env: {}, signal: ac.signal });
  return { code, out, err };
}

const BAD: Array<[string[], RegExp]> = [
  [["proxy", "--server", "http://127.0.0.1:1", "--resources", "pods", "--shards", "3/3"], /--shards "3\/3".*less than N/],
  [["proxy", "--server", "http://127.0.0.1:1", "--resources", "pods", "--shards", "half"], /--shards "half"/],
  [["proxy", "--server", "http://127.0.0.1:1", "--resources", "pods", "--shards", "shardRange(object.metadata.uid, '0x0', '0x8000000000000000')"], /--shards .*did you mean "0x0000000000000000"/],
  [["proxy", "--server", "http://127.0.0.1:1", "--resources", "Pods", "--shards", "0/2"], /--resources "Pods"/],
  [["proxy", "--server", "http://127.0.0.1:1", "--resources", "pods,,configmaps", "--shards", "0/2"], /--resources .*empty entry/],
  [["proxy", "--server", "http://127.0.0.1:1", "--resources", "pods=name", "--shards", "0/2"], /--resources .*key must be uid, namespace or owner/],
  [["proxy", "--server", "http://127.0.0.1:1", "--resources", "pods,pods", "--shards", "0/2"], /--resources .*listed twice/],
  [["proxy", "--server", "http://127.0.0.1:1", "--resources", "pods", "--shards", "0/2", "--filter", "maybe"], /invalid --filter "maybe": allowed values are "shardselector" and "labels"/],
  [["proxy", "--server", "http://127.0.0.1:1", "--resources", "pods", "--shards", "0/2", "--filter", "labels"], /--filter "labels" with --shards "0\/2" needs --ring: .*\(or --slot-label KEY\)/],
  [["proxy", "--server", "http://127.0.0.1:1", "--resources", "pods", "--shards", "0/2", "--filter", "labels", "--ring", "Bad_Ring"], /invalid --ring "Bad_Ring": allowed is a DNS-1123 label/],
  [["proxy", "--server", "http://127.0.0.1:1", "--resources", "pods", "--shards", "0/2", "--filter", "labels", "--slot-label", "has space"], /--slot-label "has space"/],
  [["proxy", "--server", "http://127.0.0.1:1", "--resources", "pods", "--shards", "0/2", "--filter", "labels", "--ring", "r", "--slot-count", "0"], /--slot-count "0"/],
  [["proxy", "--server", "http://127.0.0.1:1", "--resources", "pods", "--shards", "0/2", "--filter", "labels", "--ring", "r", "--slot-count", "4096"], /--slot-count "4096"/],
  [["proxy", "--server", "http://127.0.0.1:1", "--resources", "pods", "--shards", "ring", "--filter", "labels", "--ring", "r", "--slot-count", "64"], /--slot-count is for static shards/],
  [["proxy", "--server", "http://127.0.0.1:1", "--resources", "pods", "--shards", "0/2", "--slot-label", "a/b"], /--slot-label and --slot-count need --filter labels/],
  [["proxy", "--server", "http://127.0.0.1:1", "--resources", "widgets.example.com,configmaps=owner", "--shards", "0/2", "--fallback", "fail"], /--fallback "fail" cannot hold with owner keys in shardselector mode \(configmaps\)/],
  [["proxy", "--server", "http://127.0.0.1:1", "--shards", "0/2"], /--resources is required/],
  [["proxy", "--server", "http://127.0.0.1:1", "--resources", "pods", "--shards", "0/2", "--fallback", "maybe"], /--fallback "maybe"/],
  [["proxy", "--server", "http://127.0.0.1:1", "--resources", "pods", "--shards", "0/2", "--listen", "0.0.0.0:7443"], /--listen.*loopback/],
  [["proxy", "--server", "http://10.0.0.1:6443", "--resources", "pods", "--shards", "0/2"], /plain-HTTP/],
  [["proxy", "--resources", "pods", "--shards", "0/2", "--bogus"], /--bogus/],
  [["proxy", "--resources", "pods", "--shards", "0/2", "--bookmark-interval", "soon"], /--bookmark-interval "soon"/],
  [["proxy", "--server", "http://127.0.0.1:1", "--resources", "pods", "--shards", "0/2", "--leader-election", "deployments/x"], /--leader-election "deployments\/x"/],
  [["ranges", "0"], /N "0"/],
  [["ranges", "--key", "name", "3"], /--key "name"/],
  [["hash", "--shards", "x", "a"], /--shards "x"/],
  [["nosuch"], /unknown command "nosuch"/],
];

for (const [argv, re] of BAD) {
  t.test(`shardcar ${argv.join(" ").slice(0, 80)} exits 2 naming the flag`, async (t) => {
    const r = await run(argv);
    t.equal(r.code, 2);
    t.match(r.err, re);
  });
}

t.test("every command has --help with an example", async (t) => {
  const top = await run(["--help"]);
  t.equal(top.code, 0);
  const names = [...top.out.matchAll(/^ {2}([a-z]+) {2,}/gm)].map((m) => m[1] ?? "");
  t.ok(names.length >= 3, `commands listed: ${names.join(", ")}`);
  for (const name of names) {
    const r = await run([name, "--help"]);
    t.equal(r.code, 0, `${name} --help`);
    t.match(r.out, /Usage: shardcar/, `${name} has usage`);
    t.match(r.out, /Examples?:/, `${name} has examples`);
  }
});

t.test("hash and ranges print the KEP vectors and the N=3 boundaries", async (t) => {
  const h = await run(["hash", "--shards", "3", "default", "a"]);
  t.match(h.out, /0xebada5168620c5fe {2}"default" {2}shard 2\/3/);
  const r = await run(["ranges", "3"]);
  t.match(r.out, /1\/3 {2}\[0x5555555555555555, 0xaaaaaaaaaaaaaaaa\)/);
});

t.test("an unknown flag near a known one suggests it (--shard 0/3: did you mean --shards?), a far one suggests nothing", async (t) => {
  const near = await run(["proxy", "--server", "http://127.0.0.1:1", "--resources", "pods", "--shard", "0/3"]);
  t.equal(near.code, 2);
  t.equal(near.err, "shardcar proxy: Unknown option '--shard'; did you mean --shards?\n");
  t.match((await run(["proxy", "--resource", "pods"])).err, /Unknown option '--resource'; did you mean --resources\?/, "a letter short");
  t.match((await run(["proxy", "--sever", "http://127.0.0.1:1"])).err, /did you mean --server\?/, "a letter dropped inside");
  t.match((await run(["ranges", "--keys", "uid", "3"])).err, /did you mean --key\?/, "every command's flags, not only the proxy's");
  const far = await run(["proxy", "--resources", "pods", "--bogus"]);
  t.equal(far.err, "shardcar proxy: Unknown option '--bogus'\n", "no guess when nothing is near");
});

t.test("a --server without a scheme says the scheme is missing and names the value, with the URL it likely meant", async (t) => {
  const r = await run(["proxy", "--server", "127.0.0.1:8080", "--resources", "pods", "--shards", "0/3"]);
  t.equal(r.code, 2);
  t.equal(r.err, 'shardcar proxy: --server "127.0.0.1:8080": missing scheme, did you mean "https://127.0.0.1:8080", or "http://127.0.0.1:8080" for a development server such as shardcar devapi?\n');
  // URL parses "localhost:8080" as the scheme "localhost:": the same mistake.
  t.match((await run(["proxy", "--server", "localhost:8080", "--resources", "pods", "--shards", "0/3"])).err, /--server "localhost:8080": missing scheme, did you mean "https:\/\/localhost:8080"/);
  t.equal((await run(["proxy", "--server", "api.example.com:6443", "--resources", "pods", "--shards", "0/3"])).err, 'shardcar proxy: --server "api.example.com:6443": missing scheme, did you mean "https://api.example.com:6443"?\n', "only loopback is offered http");
});
