/**
 * Label slots: server-side filtering without the ShardedListAndWatch gate.
 *
 * In `labels` mode every sharded object carries a slot label,
 * `shard.shardcar.io/<ring>: "<slot>"`, and a proxy asks the apiserver for
 * `shard.shardcar.io/<ring> in (<owned slots>)`, a label selector every
 * Kubernetes version honours. The slot of an object is the ring slot that
 * holds the KEP-5866 hash of its shard key ({@link keyValue}), so a ring can
 * switch between `shardselector` and `labels` without moving any object, and
 * `shardcar hash` names an object's slot in both modes.
 *
 * The webhook that stamps the label, the backfill that labels what the
 * webhook missed, `audit`, `preflight` and the proxy's own check all use
 * exactly these functions: if any of them computed a slot differently, an
 * object would sit in no cache.
 *
 * Pure: no clock, no I/O.
 */
import { ConfigError, InvalidRangeError } from "../errors.ts";
import { fnv1a64 } from "./hash.ts";
import { KEYSPACE_END, normalize, type Range } from "./range.ts";
import { MAX_SLOT_COUNT, slotRange, slotsToRanges } from "./table.ts";

/** The label's prefix; the name part is the ring's name. */
export const SLOT_LABEL_PREFIX = "shard.shardcar.io/";

// A label key's name part is at most 63 characters, and a ring name is a DNS
// label, so any ring name fits.
const LABEL_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** `shard.shardcar.io/<ring>`. Throws {@link ConfigError} naming the ring when it cannot be a label name. */
export function slotLabelKey(ring: string): string {
  if (ring.length > 63 || !LABEL_NAME.test(ring)) {
    throw new ConfigError("ring", `invalid ring name ${JSON.stringify(ring)} for a slot label: need a DNS label (lowercase alphanumerics and '-', at most 63 characters)`);
  }
  return SLOT_LABEL_PREFIX + ring;
}

function checkSlotCount(slotCount: number): void {
  if (!Number.isInteger(slotCount) || slotCount < 1 || slotCount > MAX_SLOT_COUNT) {
    throw new InvalidRangeError(`slot count ${slotCount}: need an integer between 1 and ${MAX_SLOT_COUNT}`);
  }
}

/**
 * The slot whose range (`slotRange(slot, slotCount)`, i.e. `shardRange`)
 * holds `hash`. The quotient can land one slot low when a slot's end is not
 * a whole number (`floor` in `shardRange`), so it is checked against the
 * real bound rather than trusted.
 */
export function slotOfHash(hash: bigint, slotCount: number): number {
  checkSlotCount(slotCount);
  if (hash < 0n || hash >= KEYSPACE_END) throw new InvalidRangeError(`hash ${hash} is outside [0, 2^64)`);
  const guess = Number((hash * BigInt(slotCount)) / KEYSPACE_END);
  return hash >= slotRange(guess, slotCount).end ? guess + 1 : guess;
}

/** The slot of a shard key's value (a uid, a namespace, an owner's uid): its FNV-1a 64 hash's slot. */
export function slotOfValue(value: string, slotCount: number): number {
  return slotOfHash(fnv1a64(value), slotCount);
}

/** A slot as the label holds it: plain decimal. */
export function formatSlot(slot: number): string {
  return String(slot);
}

/**
 * A label value read back. Strict: plain decimal without sign or leading
 * zeros, below `slotCount`, so that exactly one text names each slot and the
 * proxy's check agrees with the server's string comparison of label values.
 * Anything else is `undefined`: an object whose label is not a slot is in no
 * cache, and is counted as unlabelled.
 */
export function parseSlot(text: string, slotCount: number): number | undefined {
  if (!/^(0|[1-9][0-9]{0,3})$/.test(text)) return undefined;
  const slot = Number(text);
  return slot < slotCount ? slot : undefined;
}

/**
 * The slots a proxy owns for `ranges`: those whose first hash lies in them.
 * For a ring the ranges are unions of whole slots, so this is exact; for a
 * static `i/N` whose bounds cut slots, every slot still goes to exactly one
 * shard of a partition (the one holding its start).
 */
export function slotsOfRanges(ranges: readonly Range[], slotCount: number): number[] {
  checkSlotCount(slotCount);
  const rs = normalize(ranges);
  const out: number[] = [];
  for (let s = 0; s < slotCount; s++) {
    const start = slotRange(s, slotCount).start;
    if (rs.some((r) => r.start <= start && start < r.end)) out.push(s);
  }
  return out;
}

/**
 * The ranges a labels-mode proxy really enforces for `ranges`: the union of
 * its slots. Equal to `ranges` for a ring; for a static spec whose bounds
 * cut slots, its slot-aligned neighbour.
 */
export function slotAlignedRanges(ranges: readonly Range[], slotCount: number): Range[] {
  return slotsToRanges(slotsOfRanges(ranges, slotCount), slotCount);
}

/**
 * `shard.shardcar.io/<ring> in (0,3,6)`: the label selector for owned slots,
 * to be ANDed (`,`) with the controller's own. `undefined` when nothing is
 * owned: no set-based requirement can express "nothing" with an empty list,
 * so the caller sends its match-nothing selector instead.
 */
export function slotLabelSelector(labelKey: string, slots: readonly number[]): string | undefined {
  const sorted = [...new Set(slots)].sort((a, b) => a - b);
  if (sorted.length === 0) return undefined;
  return `${labelKey} in (${sorted.map(formatSlot).join(",")})`;
}

/** What a sharded resource is keyed by. `owner` follows the controller ownerReference. */
export type ResourceKey = "uid" | "namespace" | "owner";

/** The parts of an object's metadata that decide its shard. */
export interface KeyMetadata {
  readonly uid?: string | undefined;
  readonly namespace?: string | undefined;
  /**
   * As the object carries it, unchecked: anything but an array of objects
   * holds no reference, as the scanners read it, so callers pass the
   * decoded JSON as it is.
   */
  readonly ownerReferences?: unknown;
}

/**
 * The uid of the object's controller ownerReference (`controller: true`), if
 * it has one. One level only, as timebertt's sharder: a grandchild follows
 * its direct controller, not the root. Kubernetes allows at most one
 * controller reference per object; should a malformed object carry several,
 * the first wins, and every component (scanners included) must agree.
 */
export function controllerOwnerUid(meta: KeyMetadata): string | undefined {
  const refs = meta.ownerReferences;
  if (!Array.isArray(refs)) return undefined;
  for (const ref of refs as unknown[]) {
    // Elements that are not objects are skipped, as the scanners skip them.
    if (typeof ref !== "object" || ref === null || Array.isArray(ref)) continue;
    const { uid, controller } = ref as { uid?: unknown; controller?: unknown };
    if (controller === true && typeof uid === "string") return uid;
  }
  return undefined;
}

/**
 * The string hashed for an object under `key`, as the server (for `uid` and
 * `namespace`) and every shardcar component must see it. A missing namespace
 * hashes as `""`, as the server's `GetNamespace()` returns it.
 * `undefined` when the value is a uid the object does not carry: during
 * CREATE admission the apiserver has not assigned it yet (an `owner` key
 * without a controller reference falls back to the uid). A stored object
 * always has one; a scanner that meets one without hashes `""`, as the server.
 */
export function keyValue(meta: KeyMetadata, key: ResourceKey): string | undefined {
  switch (key) {
    case "namespace":
      return meta.namespace ?? "";
    case "uid":
      return meta.uid === undefined || meta.uid === "" ? undefined : meta.uid;
    case "owner":
      return controllerOwnerUid(meta) ?? (meta.uid === undefined || meta.uid === "" ? undefined : meta.uid);
  }
}
