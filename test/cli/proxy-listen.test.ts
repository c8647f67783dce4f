/**
 * `shardcar proxy` on an address it cannot listen on (a port another
 * process holds): one line that names the flag and the address, exit 2,
 * not a stack trace and exit 1; and the process ends.
 */
import t, { type Test } from "tap";
import { spawn } from "node:child_process";
import { createServer, type AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import { runCli } from "../support/cli.ts";

const BIN = fileURLToPath(new URL("../../src/cli/bin.ts", import.meta.url));

async function heldPort(t: Test): Promise<number> {
  const holder = createServer();
  await new Promise<void>((resolve) => holder.listen(0, "127.0.0.1", resolve));
  t.teardown(() => holder.close());
  return (holder.address() as AddressInfo).port;
}

t.test("a --listen port in use prints one line naming the address and exits 2", async (t) => {
  const port = await heldPort(t);
  const child = spawn(process.execPath, [BIN, "proxy", "--server", "http://127.0.0.1:1", "--resources", "pods", "--shards", "0/3", "--listen", `127.0.0.1:${port}`, "--admin-listen", "off", "--log-level", "silent"], { stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (b: Buffer) => (stderr += b.toString()));
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
  t.equal(code, 2, "exit 2, a usage error");
  t.equal(stderr, `shardcar proxy: cannot listen on --listen 127.0.0.1:${port}: address already in use (another shardcar proxy, or another process, listens there)\n`, "one line, no stack");
});

t.test("an --admin-listen port in use names --admin-listen and exits 2", async (t) => {
  const port = await heldPort(t);
  const r = await runCli(["proxy", "--server", "http://127.0.0.1:1", "--resources", "pods", "--shards", "0/3", "--listen", "127.0.0.1:0", "--admin-listen", `127.0.0.1:${port}`, "--log-level", "silent"]);
  t.equal(r.code, 2);
  t.equal(r.err, `shardcar proxy: cannot listen on --admin-listen 127.0.0.1:${port}: address already in use (another shardcar proxy, or another process, listens there)\n`);
});
