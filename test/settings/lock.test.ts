/**
 * The leader-election lock a pod names (`shardcar.io/leader-election`,
 * `--leader-election`): leases, configmaps or endpoints and a DNS-subdomain
 * name; anything else is refused naming the flag and the value, and the
 * printed form reads back to the same lock.
 */
import t from "tap";
import { ConfigError } from "../../src/errors.ts";
import { formatLockSpec, parseLockSpec } from "../../src/settings/lock.ts";

t.test("lock specs: leases, configmaps and endpoints; anything else names the flag and the value", async (t) => {
  t.same(parseLockSpec("endpoints/x.y"), { resource: "endpoints", name: "x.y" });
  for (const spec of ["leases/demo-lock", "configmaps/a.b-c", "endpoints/x"]) t.equal(formatLockSpec(parseLockSpec(spec)), spec, spec);
  for (const bad of ["lease/x", "leases/", "leases/UPPER", "leases/a/b", "demo-lock", `leases/${"a".repeat(254)}`]) {
    const err = t.throws(() => parseLockSpec(bad, "shardcar.io/leader-election"), ConfigError) as ConfigError;
    t.equal(err.flag, "shardcar.io/leader-election");
    t.ok(err.message.startsWith(`invalid shardcar.io/leader-election ${JSON.stringify(bad)}: `), err.message);
  }
});
