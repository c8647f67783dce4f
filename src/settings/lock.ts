/**
 * The controller's leader-election lock, as a pod names it
 * (`shardcar.io/leader-election`, `--leader-election`, preflight's
 * `--leader-election`): `leases/<name>`, `configmaps/<name>` or
 * `endpoints/<name>`. The proxy renames it per shard (src/proxy/serving/lock-rename.ts).
 *
 * Pure: no I/O.
 */
import { ConfigError } from "../errors.ts";

export type LockResource = "leases" | "configmaps" | "endpoints";

export interface LockSpec {
  readonly resource: LockResource;
  readonly name: string;
}

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;

/** Parses `leases/my-controller` (also `configmaps/…`, `endpoints/…`). Throws {@link ConfigError} naming `flag` and the value. */
export function parseLockSpec(value: string, flag = "--leader-election"): LockSpec {
  const m = /^(leases|configmaps|endpoints)\/(.+)$/.exec(value.trim());
  if (!m || !DNS_SUBDOMAIN.test(m[2] ?? "") || (m[2] ?? "").length > 253) {
    throw new ConfigError(flag, `invalid ${flag} ${JSON.stringify(value)}: expected leases/<name>, configmaps/<name> or endpoints/<name>`);
  }
  return { resource: m[1] as LockResource, name: m[2] as string };
}

/** The one spelling {@link parseLockSpec} reads back to the same lock. */
export function formatLockSpec(lock: LockSpec): string {
  return `${lock.resource}/${lock.name}`;
}
