/**
 * A realapi of a test's own (`../shared/realapi/start.sh` on a fresh run
 * directory), for tests that need what the lane's shared server was not
 * started with: a `REALAPI_WEBHOOK_SERVICES` map (the webhook Service on a
 * loopback port) and service-account tokens in its token file.
 *
 * The gate follows the lane's (`REALAPI_GATE_SHARDED` of the shared server),
 * so each file still runs once with the gate on and once off. The server is
 * always stopped and its directory removed: on teardown, on process exit,
 * and by a watchdog if the test process is killed.
 */
import { execFile, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import type { RealApiEnv, Target } from "./realapi.ts";

const run = promisify(execFile);

export const KIT = resolve(process.env["SHARDCAR_SHARED"] ?? join(import.meta.dirname, "..", "..", "..", "..", "shared"), "realapi");

/** A bearer token in the server's token file, for `user` (a service account's name, usually). */
export interface ExtraToken {
  readonly token: string;
  readonly user: string;
  readonly groups: readonly string[];
}

export interface PrivateRealApi extends RealApiEnv {
  readonly admin: Target;
  /** The apiserver's 127.0.0.1 port. */
  readonly port: number;
  readonly pid: number;
  stop(): Promise<void>;
}

export interface PrivateRealApiOptions {
  /** `REALAPI_WEBHOOK_SERVICES` entries: `NS/NAME[:PORT]` → a 127.0.0.1 port. */
  readonly webhookServices?: Readonly<Record<string, number>>;
  readonly tokens?: readonly ExtraToken[];
}

/** `on` or `off`, as the lane's shared server runs. */
export function laneGate(): "on" | "off" {
  return process.env["REALAPI_GATE_SHARDED"] === "false" ? "off" : "on";
}

/** A service account's token, as the token file names its user and groups. */
export function serviceAccountToken(namespace: string, name: string): ExtraToken {
  return {
    token: randomBytes(24).toString("hex"),
    user: `system:serviceaccount:${namespace}:${name}`,
    groups: ["system:serviceaccounts", `system:serviceaccounts:${namespace}`, "system:authenticated"],
  };
}

const live = new Set<string>();
process.once("exit", () => {
  for (const dir of live) {
    for (const line of safeRead(join(dir, "env")).split("\n")) {
      const m = /^(?:REALAPI_PID|ETCD_PID)=(\d+)$/.exec(line);
      try {
        if (m !== null) process.kill(Number(m[1]), "SIGKILL");
      } catch {
        // already gone
      }
    }
    rmSync(dir, { recursive: true, force: true });
  }
});

export async function startPrivateRealApi(opts: PrivateRealApiOptions = {}): Promise<PrivateRealApi> {
  const gate = laneGate();
  const dir = mkdtempSync(join(tmpdir(), "shardcar-private-realapi-"));
  live.add(dir);
  // The admin token start.sh keeps in pki/token (reused across restarts, see
  // the kit's README), written first so that the token file given with
  // --token-auth-file (the last one on the command line wins) has it too.
  const admin = randomBytes(24).toString("hex");
  mkdirSync(join(dir, "pki"), { recursive: true });
  writeFileSync(join(dir, "pki", "token"), admin, { mode: 0o600 });
  const tokens = join(dir, "extra-tokens.csv");
  const line = (t: string, user: string, groups: readonly string[]): string => `${t},${user},${user},"${groups.join(",")}"\n`;
  writeFileSync(tokens, [line(admin, "admin", ["system:masters"]), ...(opts.tokens ?? []).map((t) => line(t.token, t.user, t.groups))].join(""), { mode: 0o600 });

  // Nothing of the lane's own server may leak into start.sh (its ports, run dir, PIDs).
  const env: NodeJS.ProcessEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^(REALAPI_|ETCD_|KUBECONFIG$)/.test(k)));
  env["REALAPI_RUN_DIR"] = dir;
  env["REALAPI_EXTRA_ARGS"] = `--token-auth-file ${tokens}`;
  const services = Object.entries(opts.webhookServices ?? {}).map(([svc, port]) => `${svc}=127.0.0.1:${port}`);
  if (services.length > 0) env["REALAPI_WEBHOOK_SERVICES"] = services.join(",");

  let out = "";
  for (let attempt = 1; ; attempt++) {
    try {
      out = (await run(join(KIT, "start.sh"), [gate], { env, maxBuffer: 4 << 20 })).stdout;
      break;
    } catch (e) {
      const text = `${(e as { stdout?: string }).stdout ?? ""}${(e as { stderr?: string }).stderr ?? ""}`;
      // start.sh picks free ports and binds them later; another process can
      // take one in between (the same retry as test/real/run.sh).
      if (attempt < 3 && /address already in use/.test(text + safeRead(join(dir, "realapi.log")) + safeRead(join(dir, "etcd.log")))) continue;
      live.delete(dir);
      await run(join(KIT, "stop.sh"), [dir, "--clean"]).catch(() => {});
      throw new Error(`start.sh ${gate} failed: ${text}\n${safeRead(join(dir, "realapi.log")).slice(-2000)}`, { cause: e });
    }
  }
  // start.sh detaches both servers (setsid): nothing ends them when this
  // process is killed (tap's timeout sends SIGTERM, which skips "exit"
  // handlers). A watchdog of their own stops them once this process is gone.
  const watchdog = spawn("/bin/sh", ["-c", 'while kill -0 "$0" 2>/dev/null; do sleep 1; done; exec "$1" "$2" --clean >/dev/null 2>&1', String(process.pid), join(KIT, "stop.sh"), dir], {
    detached: true,
    stdio: "ignore",
  });
  watchdog.unref();
  const kv = Object.fromEntries(out.split("\n").filter((l) => l.includes("=")).map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]));
  const url = kv["REALAPI_URL"] ?? "";
  const caFile = kv["REALAPI_CA"] ?? "";
  const caPem = readFileSync(caFile, "utf8");
  let stopped: Promise<void> | undefined;
  return {
    url,
    token: admin,
    caFile,
    caPem,
    kubeconfig: kv["KUBECONFIG"] ?? "",
    gate,
    runDir: dir,
    admin: { url, caPem, token: admin },
    port: Number(new URL(url).port),
    pid: Number(kv["REALAPI_PID"]),
    stop() {
      watchdog.kill();
      stopped ??= run(join(KIT, "stop.sh"), [dir, "--clean"]).then(
        () => void live.delete(dir),
        () => void live.delete(dir),
      );
      return stopped;
    },
  };
}

function safeRead(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return "";
  }
}
