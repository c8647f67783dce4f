/**
 * `shardcar` on a Node older than 24 says so first, with the version it
 * found, and exits 2: not V8's "Error: unrecognized flag
 * --invocation-count-for-turbofan=30000 / Try --help for options", which
 * reads as if the user's own flag were wrong.
 */
import t from "tap";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { nodeVersionProblem } from "../../src/cli/node-version.ts";

const BIN = fileURLToPath(new URL("../../src/cli/bin.ts", import.meta.url));

t.test("an older Node is refused at start, naming the version needed and the one found, with exit 2", (t) => {
  // This Node, made to report 20 before bin.ts runs: the check, not the V8 flag or anything later, must answer.
  const olderNode = `data:text/javascript,Object.defineProperty(process, "version", { value: "v20.20.2" })`;
  const r = spawnSync(process.execPath, ["--import", olderNode, BIN, "proxy", "--server", "http://127.0.0.1:1", "--resources", "pods", "--shards", "0/3"], { encoding: "utf8", timeout: 60_000 });
  t.equal(r.status, 2, "exit 2");
  t.equal(r.stdout, "", "nothing started");
  t.equal(r.stderr, `${nodeVersionProblem("v20.20.2", process.execPath) ?? ""}\n`, "the one line, and nothing else");
  t.match(r.stderr, /^shardcar needs Node 24 \(found v20\.20\.2, /);
  t.notMatch(r.stderr, /unrecognized flag/);
  t.end();
});

t.test("Node 24 and later pass the check; 22 and 20 do not", (t) => {
  t.equal(nodeVersionProblem("v24.0.0", "/node"), undefined);
  t.equal(nodeVersionProblem(process.version, process.execPath), undefined, `this Node, ${process.version}`);
  t.equal(nodeVersionProblem("v25.1.0", "/node"), undefined);
  t.match(nodeVersionProblem("v22.12.0", "/usr/bin/node"), "shardcar needs Node 24 (found v22.12.0, /usr/bin/node)");
  t.match(nodeVersionProblem("v20.20.2", "/usr/bin/node"), "shardcar needs Node 24 (found v20.20.2, /usr/bin/node)");
  t.end();
});
