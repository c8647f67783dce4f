/**
 * Serving a sharded LIST: the upstream body through the list filter for its
 * encoding, and (ring mode) through a tap that tells the index what was
 * delivered and the ledger the list's resourceVersion. A body cut by an
 * upstream error is never ended cleanly: it must fail in the client instead
 * of looking like a shorter, valid list.
 */
import type { ServerResponse } from "node:http";
import type { Readable, Transform } from "node:stream";
import { pipeline } from "node:stream";
import type { Fallback } from "../../settings/pod-settings.ts";
import { HashMatcher, type Range } from "../../shard/range.ts";
import type { Encoding } from "../request/accept.ts";
import { createJsonListFilter } from "../scan/json-list-filter.ts";
import { createJsonListTap } from "../scan/json-tap.ts";
import { createProtoListFilter } from "../scan/proto-list-filter.ts";
import { createProtoListTap } from "../scan/proto-tap.ts";
import type { ObjectKey } from "../scan/object-key.ts";
import type { ListFilterStats } from "../scan/filter-contract.ts";
import type { TapSink } from "../scan/tap.ts";
import { sendStatus } from "./status.ts";

/** What a list's tap reports to; `finish` runs once the list was delivered whole. */
export interface ListTapSink extends TapSink {
  readonly rv: string | undefined;
  finish(): void;
}

/** Only the list's resourceVersion, for ring mode without synthetic deletes (no index). */
export class RvSink implements ListTapSink {
  rv: string | undefined;
  upsert(): void {}
  remove(): void {}
  typeMeta(): void {}
  resourceVersion(rv: string): void {
    this.rv = rv;
  }
  continueToken(): void {}
  unreadable(): void {}
  finish(): void {}
}

export interface ListServing {
  /** The sharded resource's id (`pods`, `widgets.example.com`), for messages. */
  readonly resource: string;
  readonly encoding: Encoding;
  readonly body: Readable;
  readonly res: ServerResponse;
  readonly headers: Record<string, string | string[]>;
  readonly ranges: readonly Range[];
  /** What the filter and tap read to place an object (rewrite.ts). */
  readonly key: ObjectKey;
  /** Labels mode: an object without a readable slot label was dropped. */
  readonly onUnlabelled: (object: string) => void;
  readonly sentSelector: string | undefined;
  readonly maxItemBytes: number | undefined;
  readonly fallback: Fallback;
  readonly failBufferBytes: number | undefined;
  readonly sink: ListTapSink | undefined;
  /** fallback=fail refused the body (503). */
  readonly onRefused: () => void;
  /** The filter exists: `stats` is what it counts, updated in place while the body streams. Called before any byte moves. */
  readonly onStart: (stats: ListFilterStats) => void;
  /** The response ended: whole (`err` undefined) or cut. */
  readonly onDone: (err: Error | undefined, stats: ListFilterStats) => void;
}

export function serveList(o: ListServing): void {
  const filterOpts = {
    matcher: new HashMatcher(o.ranges),
    key: o.key,
    onUnlabelled: o.onUnlabelled,
    ...(o.sentSelector === undefined ? {} : { sentSelector: o.sentSelector }),
    ...(o.maxItemBytes === undefined ? {} : { maxItemBytes: o.maxItemBytes }),
  };
  const filter: Transform & { readonly stats: ListFilterStats } = o.encoding === "json" ? createJsonListFilter(filterOpts) : createProtoListFilter(filterOpts);
  o.onStart(filter.stats);
  if (o.sink !== undefined) {
    // What the controller receives, not what upstream sent: the index is of
    // delivered objects (fast path included).
    const tap = o.encoding === "json" ? createJsonListTap(o.sink, o.key) : createProtoListTap(o.sink, o.key);
    filter.on("data", (b: Buffer) => tap.write(b));
  }
  const done = (err: Error | null | undefined): void => {
    if (err) {
      // Never end cleanly: a cut chunked response fails in the client.
      o.res.destroy(err);
      o.onDone(err, filter.stats);
      return;
    }
    o.onDone(undefined, filter.stats);
  };
  if (o.fallback === "fail") {
    serveListOrRefuse(o, filter, done);
    return;
  }
  o.res.writeHead(200, o.headers);
  pipeline(o.body, filter, o.res, done);
}

/**
 * fallback=fail: hold the filtered body back until it is clear whether the
 * server filtered. The fast path (shardInfo matched) streams at once; a body
 * from which the proxy had to drop anything becomes a 503.
 */
function serveListOrRefuse(o: ListServing, filter: Transform & { readonly stats: ListFilterStats }, done: (err: Error | null | undefined) => void): void {
  const { res } = o;
  const limit = o.failBufferBytes ?? 64 * 1024 * 1024;
  const held: Buffer[] = [];
  let heldBytes = 0;
  let streaming = false;
  const refuse = (why: string): void => {
    o.onRefused();
    o.body.destroy();
    filter.destroy();
    sendStatus(res, 503, `shardcar: the apiserver did not apply the shard selector for ${o.resource} (${why}) and fallback=fail`, "ServiceUnavailable");
  };
  const startStreaming = (): void => {
    streaming = true;
    res.writeHead(200, o.headers);
    for (const b of held) res.write(b);
    held.length = 0;
  };
  filter.on("data", (chunk: Buffer) => {
    if (streaming) {
      if (!res.write(chunk)) {
        filter.pause();
        res.once("drain", () => filter.resume());
      }
      return;
    }
    if (filter.stats.path === "fast") {
      held.push(chunk);
      startStreaming();
      return;
    }
    if (filter.stats.dropped > 0) return refuse("items outside this shard were returned");
    held.push(chunk);
    heldBytes += chunk.length;
    if (heldBytes > limit) refuse(`no shardInfo within the first ${limit} bytes`);
  });
  pipeline(o.body, filter, (err) => {
    if (err) {
      done(err);
      return;
    }
    if (res.headersSent && !streaming) return;
    if (!streaming) {
      if (filter.stats.dropped > 0) {
        refuse("items outside this shard were returned");
        return;
      }
      startStreaming();
    }
    res.end();
    done(undefined);
  });
}
