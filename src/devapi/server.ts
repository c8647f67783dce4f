/**
 * The HTTP layer of devapi: routes requests to the store, negotiates the
 * response format, applies the KEP-5866 gate, and streams lists and watches.
 * Decisions live in the pure modules (request, gate, list, selection,
 * selectors, negotiate, table, list-encoding); this file reads inputs, calls
 * them, and writes bytes through http-io.ts. Writes that a webhook admits
 * go out through admission-client.ts.
 */
import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "../log.ts";
import { admit, matches, type AdmissionOperation, type MutatingWebhook } from "./admission.ts";
import { callWebhook } from "./admission-client.ts";
import { decodeContinue, encodeContinue } from "./continue.ts";
import { apiGroup, coreVersions, groupList, groupsOf, resourceList, rootPaths, VERSION_INFO } from "./discovery.ts";
import { effectiveGate, watchFiltered, type EffectiveGate } from "./gate.ts";
import { goJson } from "./json.ts";
import { isRecord } from "../is-record.ts";
import { baseHeaders, parseJson, preconditions, prettyJson, readBody, readJson, writeChunked } from "./http-io.ts";
import { selectPage, type Page, type ServingPath } from "./list.ts";
import { listBody } from "./list-encoding.ts";
import { negotiate, wantsPretty, type OutputFormat } from "./negotiate.ts";
import { patchTypeOf, type PatchType } from "./patch.ts";
import { answerReview, SUBJECT_ACCESS_REVIEWS, TOKEN_REVIEWS, type DevAuth } from "./reviews.ts";
import { parseListQuery, parseResourceVersion, requestUrl, route, type ListQuery, type Route } from "./request.ts";
import { selectionOf } from "./selection.ts";
import {
  badRequest,
  DevApiStatusError,
  expired,
  internal,
  methodNotAllowed,
  notAcceptable,
  notFound,
  tooLargeResourceVersion,
  unauthorized,
  unsupportedMediaType,
  type StatusBody,
} from "./status.ts";
import { keyOf, type MemoryStore, type ResourceState, type StoreListener, type StoredObject } from "./store.ts";
import { columnDefinitionsJson, pomJson, rowJson } from "./table.ts";
import type { GateMode } from "./types.ts";
import { viewEvent, WatchSession } from "./watch.ts";

export interface RequestRecord {
  method: string;
  url: string;
  /** The `Audit-Id` its answer carries, as the apiserver's: names the request an answer is to. */
  auditId: string;
  authorization?: string;
  /** Set when the request was served as a LIST or WATCH of a whole collection (not one named object): what the server read it as. */
  served?: { verb: "list" | "watch"; resource: string };
}

export interface DevApiStats {
  /** LIST requests per resource plural (`pods`, `leases`), counted when they arrive. */
  readonly lists: Map<string, number>;
  /** WATCH requests (including watch-lists) per resource plural. */
  readonly watches: Map<string, number>;
  /** The most recent requests, oldest first (bounded; see `maxRecordedRequests`). */
  readonly requests: RequestRecord[];
  /** Watch streams currently open. */
  readonly openWatches: number;
  /** Each open watch stream's request target, and the bearer token that sent it: what a leak names. */
  readonly openWatchUrls: readonly string[];
}

/** A watch as a leak report names it: its target, and its token (a test's names the case that sent it). */
function watchCaller(req: IncomingMessage): string {
  const token = /^Bearer (\S{1,80})/i.exec(req.headers.authorization ?? "")?.[1];
  return token === undefined ? (req.url ?? "/") : `${req.url ?? "/"} (token ${token})`;
}

export interface HandlerOptions {
  readonly store: MemoryStore;
  readonly logger: Logger;
  readonly bookmarkIntervalMs: number;
  readonly requireToken: boolean | string;
  /** What TokenReview and SubjectAccessReview answer (reviews.ts); without it, nobody is authenticated. */
  readonly auth?: DevAuth | undefined;
  readonly maxRecordedRequests: number;
  readonly now: () => number;
  /** host:port for `/api` discovery. */
  readonly serverAddress: () => string;
  /** The mutating webhooks writes go through, in order. */
  readonly webhooks: () => readonly MutatingWebhook[];
}

function isHealthPath(pathname: string): boolean {
  return /^\/(healthz|readyz|livez)(\/.*)?$/.test(pathname);
}

function bump(m: Map<string, number>, k: string): void {
  m.set(k, (m.get(k) ?? 0) + 1);
}

/** The request handler and its state: gate mode, counters, open watches. */
export class DevApiHandler {
  private readonly o: HandlerOptions;
  private gateMode: GateMode = "on";
  private gateIndex = 0;
  /** Open watch streams, and the request target each serves. */
  private readonly sessions = new Map<WatchSession, string>();
  readonly stats: DevApiStats;

  constructor(o: HandlerOptions, gate: GateMode) {
    this.o = o;
    this.gateMode = gate;
    const sessions = this.sessions;
    this.stats = {
      lists: new Map(),
      watches: new Map(),
      requests: [],
      get openWatches() {
        return sessions.size;
      },
      get openWatchUrls() {
        return [...sessions.values()];
      },
    };
  }

  get gate(): GateMode {
    return this.gateMode;
  }

  /** Setting the mode restarts the `mixed` alternation at `on`. */
  set gate(mode: GateMode) {
    this.gateMode = mode;
    this.gateIndex = 0;
  }

  /** Ends every open watch stream. */
  closeWatches(): void {
    for (const s of [...this.sessions.keys()]) s.close();
  }

  private nextGate(): EffectiveGate {
    return effectiveGate(this.gateMode, this.gateIndex++);
  }

  private record(req: IncomingMessage, res: ServerResponse): RequestRecord {
    const r: RequestRecord = { method: req.method ?? "GET", url: req.url ?? "/", auditId: randomUUID() };
    // One id per request, on every answer to it (errors included), as the apiserver's audit filter sets it.
    res.setHeader("Audit-Id", r.auditId);
    const auth = req.headers.authorization;
    if (auth !== undefined) r.authorization = auth;
    const list = this.stats.requests;
    list.push(r);
    if (list.length > this.o.maxRecordedRequests) list.splice(0, list.length - this.o.maxRecordedRequests);
    return r;
  }

  private authorized(req: IncomingMessage): boolean {
    const want = this.o.requireToken;
    if (want === false) return true;
    const auth = req.headers.authorization ?? "";
    if (want === true) return /^Bearer \S+$/.test(auth);
    return auth === `Bearer ${want}`;
  }

  /** The `node:http` request listener. Never rejects. */
  handle = (req: IncomingMessage, res: ServerResponse): void => {
    this.dispatch(req, res).catch((e: unknown) => this.fail(req, res, e));
  };

  private fail(req: IncomingMessage, res: ServerResponse, e: unknown): void {
    let status: StatusBody;
    if (e instanceof DevApiStatusError) {
      status = e.status;
    } else {
      this.o.logger.error({ err: e, method: req.method, url: req.url }, "devapi: internal error");
      status = internal(e instanceof Error ? e.message : String(e)).status;
    }
    if (res.headersSent) {
      res.destroy();
      return;
    }
    const url = requestUrl(req.url ?? "/");
    this.send(res, status.code, status, wantsPretty(url.searchParams, req.headers["user-agent"]));
  }

  private send(res: ServerResponse, code: number, body: unknown, pretty: boolean): void {
    const text = pretty ? prettyJson(goJson(body)) : goJson(body);
    const buf = Buffer.from(text);
    res.writeHead(code, { ...baseHeaders(), "Content-Length": buf.length });
    res.end(buf);
  }

  private sendBytes(res: ServerResponse, code: number, body: Buffer, pretty: boolean): void {
    const buf = pretty ? Buffer.from(prettyJson(body.toString("utf8"))) : body;
    res.writeHead(code, { ...baseHeaders(), "Content-Length": buf.length });
    res.end(buf);
  }

  private async dispatch(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const record = this.record(req, res);
    const url = requestUrl(req.url ?? "/");
    const pretty = wantsPretty(url.searchParams, req.headers["user-agent"]);
    const store = this.o.store;
    // Authentication comes first, as on a real server: an unauthenticated client learns nothing, not even a 404.
    if (!isHealthPath(url.pathname) && !this.authorized(req)) throw unauthorized();
    if ((req.method ?? "GET") === "POST" && (url.pathname === TOKEN_REVIEWS || url.pathname === SUBJECT_ACCESS_REVIEWS)) {
      this.send(res, 201, answerReview(url.pathname, await readJson(req), this.o.auth), pretty);
      return;
    }
    const r = route(
      url.pathname,
      (g, v, res_) => store.find({ group: g, version: v, resource: res_ }),
      (g, v) => {
        const vs = groupsOf(store.all().map((s) => s.def)).get(g);
        return vs !== undefined && (v === undefined || vs.includes(v));
      },
    );
    if (r.kind === "health") {
      res.writeHead(200, { "Content-Type": "text/plain; charset=utf-8" });
      res.end("ok");
      return;
    }
    const method = req.method ?? "GET";
    if (r.kind !== "resource") {
      if (method !== "GET") throw methodNotAllowed();
      this.send(res, 200, this.discovery(r), pretty);
      return;
    }
    const collection = r.name === undefined;
    switch (method) {
      case "GET":
        if (collection || r.watchPath) await this.listOrWatch(req, res, r, url.searchParams, pretty, record);
        else this.getOne(req, res, r, pretty);
        return;
      case "POST": {
        if (!collection || r.watchPath || (r.state.def.namespaced && r.namespace === undefined)) throw methodNotAllowed();
        const body = await this.admitted(r.state, "CREATE", await readJson(req), null, r.namespace);
        this.sendBytes(res, 201, store.createIn(r.state, body, { namespace: r.namespace ?? "", keepIdentity: false }).full, pretty);
        return;
      }
      case "PUT": {
        if (collection || r.watchPath) throw methodNotAllowed();
        const sub = r.subresource ? { subresource: r.subresource } : {};
        const old = r.subresource === undefined ? r.state.objects.get(keyOf(r.state.def.namespaced ? (r.namespace ?? "") : "", r.name)) : undefined;
        const body = old === undefined ? await readJson(req) : await this.admitted(r.state, "UPDATE", await readJson(req), old.object, r.namespace);
        const o = store.replaceIn(r.state, body, { namespace: r.namespace ?? "", name: r.name, ...sub });
        this.sendBytes(res, 200, o.full, pretty);
        return;
      }
      case "PATCH": {
        if (collection || r.watchPath) throw methodNotAllowed();
        const ct = req.headers["content-type"] ?? "";
        const type = patchTypeOf(ct);
        if (type === undefined) throw unsupportedMediaType(ct);
        const patch = parseJson(await readBody(req));
        this.sendBytes(res, 200, (await this.patch(r, patch, type)).full, pretty);
        return;
      }
      case "DELETE": {
        if (r.watchPath || r.subresource !== undefined) throw methodNotAllowed();
        if (collection) {
          await this.deleteCollection(req, res, r, url.searchParams, pretty);
          return;
        }
        const raw = await readBody(req);
        const pre = preconditions(raw.length === 0 ? {} : parseJson(raw));
        this.sendBytes(res, 200, store.deleteIn(r.state, r.namespace, r.name, pre).full, pretty);
        return;
      }
      default:
        throw methodNotAllowed();
    }
  }

  /** `body` after the mutating webhooks that match (the object unchanged when none does, or when it is not an object). */
  private async admitted(state: ResourceState, operation: AdmissionOperation, body: unknown, old: KubeObjectLike | null, namespace: string | undefined): Promise<unknown> {
    const def = state.def;
    const hooks = this.o.webhooks();
    if (!isRecord(body) || !hooks.some((h) => matches(h, def.group, def.resource, operation))) return body;
    const meta = isRecord(body.metadata) ? body.metadata : {};
    const ns = def.namespaced ? (namespace ?? (typeof meta.namespace === "string" ? meta.namespace : "")) : "";
    // As the apiserver's handler does before admission: a created object carries the request's namespace.
    const object = (def.namespaced && operation === "CREATE" ? { ...body, metadata: { ...meta, namespace: ns } } : body) as KubeObjectLike;
    return admit(
      hooks,
      { uid: randomUUID(), group: def.group, version: def.version, resource: def.resource, kind: def.kind, operation, name: typeof meta.name === "string" ? meta.name : "", namespace: ns, object, oldObject: old },
      callWebhook,
    );
  }

  /**
   * PATCH through admission, as the apiserver's update loop does it: patch
   * the current object, admit the result, store it if nothing was written
   * meanwhile, else start over from the newer object (unless the patch
   * itself named a resourceVersion: then the 409 is the answer).
   */
  private async patch(r: Extract<Route, { kind: "resource" }>, patch: unknown, type: PatchType): Promise<StoredObject> {
    const store = this.o.store;
    const name = r.name as string;
    if (r.subresource !== undefined || !this.o.webhooks().some((h) => matches(h, r.state.def.group, r.state.def.resource, "UPDATE"))) {
      return store.patchIn(r.state, r.namespace, name, patch, type, r.subresource);
    }
    for (let attempt = 0; ; attempt++) {
      const { old, patched } = store.previewPatch(r.state, r.namespace, name, patch, type);
      const preconditioned = patched.metadata?.resourceVersion !== String(old.rv);
      const body = await this.admitted(r.state, "UPDATE", patched, old.object, r.namespace);
      try {
        return store.replaceIn(r.state, body, { namespace: r.namespace ?? "", name });
      } catch (e) {
        if (preconditioned || attempt >= 4 || !(e instanceof DevApiStatusError) || e.status.code !== 409) throw e;
      }
    }
  }

  private discovery(r: Exclude<Route, { kind: "resource" } | { kind: "health" }>): unknown {
    const defs = this.o.store.all().map((s) => s.def);
    switch (r.kind) {
      case "root":
        return rootPaths(defs);
      case "version":
        return VERSION_INFO;
      case "coreVersions":
        return coreVersions(this.o.serverAddress());
      case "groups":
        return groupList(defs);
      case "group":
        return apiGroup(defs, r.group);
      case "resources":
        return resourceList(defs, r.group, r.version);
    }
  }

  private getOne(req: IncomingMessage, res: ServerResponse, r: Extract<Route, { kind: "resource" }>, pretty: boolean): void {
    // A single-object GET ignores shardSelector entirely, even an invalid one (recorded).
    const format = negotiate(req.headers.accept);
    if (format === undefined) throw notAcceptable();
    const o = r.state.objects.get(r.namespace === undefined ? (r.name as string) : `${r.namespace}/${r.name as string}`);
    if (!o) throw notFound(r.state.qualified, r.name as string);
    if (format.kind === "json") return this.sendBytes(res, 200, o.full, pretty);
    if (format.kind === "pom") return this.sendBytes(res, 200, pomJson(o, format.version), pretty);
    const q = parseListQuery(requestUrl(req.url ?? "/").searchParams, false);
    const body = Buffer.concat([
      Buffer.from(`{"kind":"Table","apiVersion":"meta.k8s.io/${format.version}","metadata":{"resourceVersion":"${o.rv}"},"columnDefinitions":${columnDefinitionsJson(r.state.def.columns)},"rows":[`),
      rowJson(o, r.state.def.columns, q.includeObject, format.version, this.o.now()),
      Buffer.from("]}"),
    ]);
    this.sendBytes(res, 200, body, pretty);
  }

  private async listOrWatch(req: IncomingMessage, res: ServerResponse, r: Extract<Route, { kind: "resource" }>, params: URLSearchParams, pretty: boolean, record: RequestRecord): Promise<void> {
    const format = negotiate(req.headers.accept);
    if (format === undefined) throw notAcceptable();
    const q = parseListQuery(params, r.watchPath);
    const def = r.state.def;
    if (r.name === undefined) record.served = { verb: q.watch ? "watch" : "list", resource: def.group === "" ? def.resource : `${def.resource}.${def.group}` };
    if (q.watch) {
      bump(this.stats.watches, r.state.def.resource);
      this.watch(res, r, q, format, watchCaller(req));
      return;
    }
    bump(this.stats.lists, r.state.def.resource);
    await this.list(res, r, q, format, pretty);
  }

  private async list(res: ServerResponse, r: Extract<Route, { kind: "resource" }>, q: ListQuery, format: OutputFormat, pretty: boolean): Promise<void> {
    const state = r.state;
    const gate = this.nextGate();
    const sel = selectionOf(state, q, r.namespace, gate);
    const current = this.o.store.currentRv;

    let atRv: number | undefined;
    let after: string | undefined;
    let limit = q.limit;
    let path: ServingPath = "cache";
    if (q.continueToken !== "") {
      if ((q.resourceVersion ?? "") !== "" && q.resourceVersion !== "0") throw badRequest("specifying resource version is not allowed when using continue");
      const tok = decodeContinue(q.continueToken);
      after = tok.after;
      if (tok.rv !== -1) {
        if (tok.rv < state.compactedRv) {
          throw expired(
            "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
            encodeContinue(-1, tok.after),
          );
        }
        atRv = tok.rv;
      }
    } else if (q.resourceVersion === "0") {
      // The watch cache serves resourceVersion=0 and ignores limit (recorded).
      limit = 0;
    } else if (q.resourceVersion !== undefined && q.resourceVersion !== "") {
      const n = parseResourceVersion(q.resourceVersion);
      if (n > current) throw tooLargeResourceVersion(n, current);
      if (q.resourceVersionMatch === "Exact") {
        atRv = n;
        path = "etcd";
      }
    }
    const servedRv = atRv ?? current;
    const items = state.itemsAt(atRv, r.namespace, after);
    const page = selectPage({ items, matches: (o) => sel.matches(o), limit, predicateEmpty: sel.labels.length === 0 && sel.fields.length === 0, path });
    const parts = listBody(sel, format, page, servedRv, path, q, this.o.now());
    res.writeHead(200, { ...baseHeaders() });
    if (pretty) {
      res.end(prettyJson(Buffer.concat(parts).toString("utf8")));
      return;
    }
    await writeChunked(res, parts);
  }

  private watch(res: ServerResponse, r: Extract<Route, { kind: "resource" }>, q: ListQuery, format: OutputFormat, caller: string): void {
    const state = r.state;
    const store = this.o.store;
    const gate = this.nextGate();
    const sel = selectionOf(state, q, r.namespace, gate);
    if (r.name !== undefined) sel.fields = [...sel.fields, { field: "metadata.name", op: "=", value: r.name }];
    if (!watchFiltered(gate, sel.labels.length > 0 || sel.fields.length > 0)) sel.shard = undefined;
    const passes = (o: StoredObject): boolean => sel.matches(o);
    const restamp = (o: StoredObject, rv: number): StoredObject => state.restamp(o, rv);

    // Where the stream starts (cacher.Watch): sendInitialEvents=true, or the
    // legacy unset/"0" resourceVersion, sends the current state first.
    const rvParam = q.resourceVersion ?? "";
    const legacyCurrent = rvParam === "" || rvParam === "0";
    const initial = q.sendInitialEvents === true || (q.sendInitialEvents === undefined && legacyCurrent);
    const fromRv = q.sendInitialEvents === true || legacyCurrent ? store.currentRv : parseResourceVersion(rvParam);

    res.writeHead(200, { ...baseHeaders(), "Transfer-Encoding": "chunked" });
    res.flushHeaders();
    const now = this.o.now;
    let unsubscribe = (): void => undefined;
    const session = new WatchSession(res, {
      def: state.def,
      format,
      includeObject: q.includeObject,
      bookmarks: q.allowWatchBookmarks,
      bookmarkIntervalMs: this.o.bookmarkIntervalMs,
      deadline: q.timeoutSeconds !== undefined && q.timeoutSeconds > 0 ? now() + q.timeoutSeconds * 1000 : undefined,
      currentRv: () => store.currentRv,
      now,
      onClose: () => {
        unsubscribe();
        this.sessions.delete(session);
      },
    });
    if (session.isClosed) return;
    this.sessions.set(session, caller);

    // Everything from here to subscribing is synchronous: no write can slip between the snapshot (or replay) and the live feed.
    if (initial) {
      session.initial(state.itemsAt(undefined, r.namespace, undefined).filter(passes));
      // The initial-events-end bookmark (watch-list; also recorded for resourceVersion=0 with bookmarks).
      if (q.allowWatchBookmarks) session.bookmark(true);
    } else {
      let replay;
      try {
        replay = state.eventsSince(fromRv);
      } catch (e) {
        if (e instanceof DevApiStatusError) {
          session.fail(e.status);
          return;
        }
        throw e;
      }
      for (const e of replay) {
        const v = viewEvent(e, passes, restamp);
        if (v) session.event(v.type, v.object);
      }
    }
    const listener: StoreListener = (e) => {
      if (e.rv <= fromRv) return;
      const v = viewEvent(e, passes, restamp);
      if (v) session.event(v.type, v.object);
    };
    state.listeners.add(listener);
    unsubscribe = () => {
      state.listeners.delete(listener);
    };
    if (session.isClosed) unsubscribe();
  }

  private async deleteCollection(req: IncomingMessage, res: ServerResponse, r: Extract<Route, { kind: "resource" }>, params: URLSearchParams, pretty: boolean): Promise<void> {
    await readBody(req);
    const q = parseListQuery(params, false);
    const sel = selectionOf(r.state, q, r.namespace, this.nextGate());
    const store = this.o.store;
    const deleted = r.state
      .itemsAt(undefined, r.namespace, undefined)
      .filter((o) => sel.matches(o))
      .map((o) => store.deleteIn(r.state, o.namespace, o.name));
    const page: Page = { items: deleted };
    const parts = listBody(sel, { kind: "json" }, page, store.currentRv, "etcd", q, this.o.now());
    this.sendBytes(res, 200, Buffer.concat(parts), pretty);
  }
}

type KubeObjectLike = StoredObject["object"];
