/**
 * Taps read what a filter *delivered* to the controller (its output, not the
 * upstream body), so the proxy knows what each controller's cache holds: the
 * index behind synthetic DELETED events (docs/rings.md, "Narrowing without a
 * relist"). A tap never changes a byte and never throws: output the filter
 * produced is well formed, and anything a tap cannot read makes it report
 * {@link TapSink.unreadable} and go quiet, so the proxy relists instead of
 * trusting an index with holes.
 */

/** An object the controller's cache now holds, by the identity informers key it by. */
export interface DeliveredObject {
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
  /**
   * Its key's point in the keyspace (object-key.ts), as the filter that
   * delivered it judged it: the hash of its uid, namespace or owner, or its
   * slot's first hash. What a narrowing tests against the new ranges.
   */
  readonly keyHi: number;
  readonly keyLo: number;
}

export interface TapSink {
  /** The object reached the cache (a kept list item, or a passed ADDED/MODIFIED). */
  upsert(obj: DeliveredObject): void;
  /** A DELETED event for `namespace/name` reached the client. */
  remove(namespace: string, name: string): void;
  /** The kind and apiVersion of the delivered objects (a list's, with `List` removed). */
  typeMeta(apiVersion: string, kind: string): void;
  /** Watch: the client's resourceVersion is now `rv` (an event or a bookmark went out). List: the list's resourceVersion. */
  resourceVersion(rv: string): void;
  /** List only: the list metadata carried this `continue` token. */
  continueToken(token: string): void;
  /** The tap cannot vouch for what it saw (a Table, unreadable bytes); it reports nothing more. */
  unreadable(reason: string): void;
}

export interface Tap {
  /** Bytes the filter is about to push to the client, in order. */
  write(chunk: Buffer): void;
}

/** `PodList` → `Pod`; a kind that is not a list is returned as is. */
export function itemKind(listKind: string): string {
  return listKind.endsWith("List") && listKind.length > 4 ? listKind.slice(0, -4) : listKind;
}
