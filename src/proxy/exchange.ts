/**
 * One sharded request as the proxy handler tracks it, from arrival until its
 * response (a watch: its stream) is over, and what it was sent upstream as.
 * Types the handler (server.ts) and its helpers share.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Readable } from "node:stream";
import type { Range } from "../shard/range.ts";
import type { ShardedResource } from "../shard/spec.ts";
import type { Rid } from "./handoff/ledger/types.ts";
import type { WatchSink } from "./handoff/object-index.ts";
import type { Encoding } from "./request/accept.ts";
import type { ResourceRequest } from "./request/classify.ts";
import type { ObjectKey } from "./scan/object-key.ts";
import type { ServedWatch } from "./serving/watch-serving.ts";
/** A sharded request as it was sent upstream. */
export interface Sent {
  readonly generation: number;
  readonly query: URLSearchParams;
  readonly ranges: readonly Range[];
  readonly sentSelector: string | undefined;
  /** What the filters read to place an object. */
  readonly objectKey: ObjectKey;
  /** The server was given nothing to filter by (owner key, shardselector mode): the verdict is the proxy's. */
  readonly proxyFilters: boolean;
}

/** One sharded request, from arrival until its response (a watch: its stream) is over. */
export interface Exchange {
  readonly rid: Rid;
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly kind: "list" | "watch";
  readonly request: ResourceRequest;
  /** The sharded resource's id (`pods`, `widgets.example.com`). */
  readonly resource: string;
  readonly lineage: string;
  /** The proxy's own answer, when the request cannot be served (bad selector, Accept). */
  readonly early: { readonly status: number; readonly message: string } | undefined;
  /** Set by `send`: the generation its response is stamped with, and what it was rewritten to (rewrite.ts). */
  sent: Sent | undefined;
  /** A WATCH answered upstream, waiting for the ledger to serve or expire it. */
  answered: { readonly body: Readable; readonly encoding: Encoding; readonly headers: Record<string, string | string[]>; readonly sink: WatchSink | undefined } | undefined;
  watch: ServedWatch | undefined;
  /** A LIST response is being served: its `list-done` (not the client's close) is its last event. */
  listing: boolean;
}

export function resourceId(r: ShardedResource): string {
  return r.group === "" ? r.resource : `${r.resource}.${r.group}`;
}
