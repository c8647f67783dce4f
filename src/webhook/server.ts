/**
 * The webhook's HTTPS edge: guards (method, path, body size, content type,
 * JSON), then {@link reviewPodAdmission} (`/mutate-pods`) or, when the
 * manager runs label slots, {@link reviewLabelAdmission} (`/label-slots`):
 * both endpoints pass the same guards. Everything the apiserver would
 * never send still gets a clear AdmissionReview answer, so a misconfigured
 * webhook shows its cause in the apiserver's log instead of an opaque
 * decoding failure.
 */
import { createServer, type Server } from "node:https";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Logger } from "../log.ts";
import type { LabelSlotConfig } from "../ring/label-slots.ts";
import type { InjectorConfig } from "./config.ts";
import { isObject, obj, str } from "./json.ts";
import { reviewLabelAdmission, type LabelOutcome } from "./label-review.ts";
import type { TlsMaterial } from "../pki/ca.ts";
import { completeReview, errored, type AdmissionReviewResponse } from "./response.ts";
import { reviewPodAdmission, type ReviewOutcome } from "./review.ts";

/** Path of the pod mutation endpoint, as the MutatingWebhookConfiguration names it. */
export const MUTATE_PODS_PATH = "/mutate-pods";
/** Path of the stamping webhook for the sharded resources of labels-mode rings. */
export const LABEL_SLOTS_PATH = "/label-slots";

/**
 * Largest AdmissionReview accepted. The apiserver caps a request body at
 * 3 MiB, so one object is at most 3 MiB of JSON; a review may carry two
 * (`object` and `oldObject`), plus 1 MiB for userInfo, options and the
 * envelope: 2 × 3 + 1 = 7 MiB, the same derivation as controller-runtime's
 * `maxRequestSize`.
 */
export const MAX_REVIEW_BYTES = 7 * 1024 * 1024;

export interface WebhookServerOptions {
  readonly host: string;
  /** 0 picks a free port; see {@link WebhookServer.port}. */
  readonly port: number;
  readonly tls: TlsMaterial;
  readonly config: InjectorConfig;
  readonly logger: Logger;
  /** Called after each admission, e.g. to count outcomes. Must not throw. */
  readonly onOutcome?: (outcome: ReviewOutcome) => void;
  /** Serves {@link LABEL_SLOTS_PATH} when given (docs/label-slots.md). */
  readonly labelSlots?: LabelSlotsEndpoint | undefined;
}

export interface LabelSlotsEndpoint {
  /** The labels-mode rings right now; `undefined` until the manager has read the ShardRings. */
  config(): LabelSlotConfig | undefined;
  /** Called after each review. Must not throw. */
  readonly onOutcome?: (outcome: LabelOutcome) => void;
}

export interface WebhookServer {
  /** The bound port (useful with port 0). */
  readonly port: number;
  /** Swaps the serving certificate for new connections; existing ones keep theirs. */
  setTls(tls: TlsMaterial): void;
  /** Stops accepting, lets in-flight reviews finish (at most 5 s), then resolves. Safe to call twice. */
  close(): Promise<void>;
}

/** Starts listening; resolves once bound. Rejects if the port cannot be bound. */
export async function startWebhookServer(opts: WebhookServerOptions): Promise<WebhookServer> {
  const { logger } = opts;
  const server: Server = createServer(
    {
      key: opts.tls.key,
      cert: opts.tls.cert,
      minVersion: "TLSv1.2",
      // The apiserver's webhook client gives a call at most 30 s
      // (timeoutSeconds ≤ 30), so nothing legitimate takes longer.
      requestTimeout: 30_000,
      headersTimeout: 30_000,
      // Longer than Go's default idle-connection timeout (90 s): the
      // apiserver then closes idle keep-alive connections first, and never
      // sends a review on a socket this side is closing.
      keepAliveTimeout: 100_000,
    },
    (req, res) => {
      handle(req, res, opts).catch((e: unknown) => {
        logger.error({ err: e }, "webhook request failed");
        if (!res.headersSent) writeReview(res, completeReview("", errored(500, e)));
        else res.destroy();
      });
    },
  );
  server.on("tlsClientError", (err) => logger.debug({ err }, "webhook TLS handshake failed"));

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(opts.port, opts.host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  logger.info({ host: opts.host, port, path: MUTATE_PODS_PATH }, "webhook server listening");

  let closing: Promise<void> | undefined;
  return {
    port,
    setTls(tls) {
      server.setSecureContext({ key: tls.key, cert: tls.cert });
    },
    close() {
      closing ??= new Promise<void>((resolve) => {
        const force = setTimeout(() => server.closeAllConnections(), 5_000);
        server.close(() => {
          clearTimeout(force);
          resolve();
        });
        server.closeIdleConnections();
      });
      return closing;
    },
  };
}

async function handle(req: IncomingMessage, res: ServerResponse, opts: WebhookServerOptions): Promise<void> {
  const path = (req.url ?? "/").split("?")[0];
  if (path === "/healthz") {
    res.writeHead(200, { "content-type": "text/plain" }).end("ok\n");
    return;
  }
  const labels = path === LABEL_SLOTS_PATH ? opts.labelSlots : undefined;
  if (path !== MUTATE_PODS_PATH && labels === undefined) {
    const served = [MUTATE_PODS_PATH, ...(opts.labelSlots === undefined ? [] : [LABEL_SLOTS_PATH]), "/healthz"];
    res.writeHead(404, { "content-type": "text/plain" }).end(`not found: shardcar serves ${served.join(", ")}\n`);
    return;
  }
  if (req.method !== "POST") {
    res.writeHead(405, { "content-type": "text/plain", allow: "POST" }).end(`method ${req.method ?? ""} not allowed: POST an AdmissionReview\n`);
    return;
  }

  // These answers echo the request's uid when it can be read: the apiserver
  // refuses an answer whose uid differs, and would show that instead of why.
  const reject = (code: number, message: string, bodyUnread: boolean, uid = ""): void => {
    opts.logger.warn({ code, reason: message, uid }, "malformed admission request");
    writeReview(res, completeReview(uid, errored(code, new Error(message))), bodyUnread);
  };

  const declared = Number(req.headers["content-length"] ?? "NaN");
  if (declared > MAX_REVIEW_BYTES) {
    reject(413, `request body of ${declared} bytes is over the ${MAX_REVIEW_BYTES}-byte limit`, true);
    return;
  }

  const read = await readLimited(req, MAX_REVIEW_BYTES);
  if (read === "too-large") {
    // Reading stopped at the limit: a sender of an endless body must not
    // make us buffer it. The connection is closed after the answer.
    reject(413, `request body is over the ${MAX_REVIEW_BYTES}-byte limit`, true);
    return;
  }
  let body: unknown;
  let parseError: string | undefined;
  try {
    body = read.length === 0 ? undefined : JSON.parse(read.toString("utf8"));
  } catch (e) {
    parseError = e instanceof Error ? e.message : String(e);
  }
  const contentType = (req.headers["content-type"] ?? "").split(";")[0]?.trim().toLowerCase() ?? "";
  if (contentType !== "application/json") {
    reject(415, `content type ${JSON.stringify(req.headers["content-type"] ?? "")} is not supported: send application/json`, false, uidOf(body));
    return;
  }
  if (read.length === 0) {
    reject(400, "request body is empty; expected an admission.k8s.io/v1 AdmissionReview", false);
    return;
  }
  if (parseError !== undefined) {
    reject(400, `request body is not valid JSON: ${parseError}`, false);
    return;
  }

  const started = performance.now();
  if (labels !== undefined) {
    const answer = reviewLabelAdmission(body, labels.config());
    const ms = Math.round((performance.now() - started) * 100) / 100;
    const log = { uid: answer.review.response.uid, object: answer.subject, ...answer.outcome, ms };
    if (answer.outcome.result === "errored") opts.logger.warn(log, "label-slots admission errored");
    else opts.logger.debug(log, `label-slots admission ${answer.outcome.result}`);
    labels.onOutcome?.(answer.outcome);
    writeReview(res, answer.review);
    return;
  }
  const { review, outcome, pod } = reviewPodAdmission(body, opts.config);
  const ms = Math.round((performance.now() - started) * 100) / 100;
  const uid = review.response.uid;
  if (outcome.result === "errored") opts.logger.warn({ uid, pod, ...outcome, ms }, "admission errored");
  else opts.logger.info({ uid, pod, ...outcome, ms }, `admission ${outcome.result}`);
  opts.onOutcome?.(outcome);
  writeReview(res, review);
}

/** `request.uid` of a parsed body, or "" when it has none. */
function uidOf(body: unknown): string {
  const request = isObject(body) ? obj(body["request"]) : undefined;
  return str(request?.["uid"]) ?? "";
}

/**
 * Reads the whole body, or stops (pausing the stream, without destroying the
 * socket) as soon as it exceeds `limit`.
 */
function readLimited(req: IncomingMessage, limit: number): Promise<Buffer | "too-large"> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = (): void => {
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("error", onError);
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > limit) {
        done();
        req.pause();
        resolve("too-large");
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = (): void => {
      done();
      resolve(Buffer.concat(chunks, size));
    };
    const onError = (e: Error): void => {
      done();
      reject(e);
    };
    req.on("data", onData);
    req.on("end", onEnd);
    req.on("error", onError);
  });
}

/**
 * Writes a review with HTTP 200, as controller-runtime does: the apiserver
 * reads the verdict (and its message) from the body, not the status line.
 *
 * `close` is for requests whose body was not (fully) read. The connection is
 * then half-closed after the answer and torn down half a second later, the
 * "lingering close" Go's net/http does: closing at once with unread input
 * pending makes the kernel send a reset, which can destroy the answer before
 * the client reads it. (A `Connection: close` header would make Node destroy
 * the socket as soon as the answer is written, which is exactly that.)
 */
function writeReview(res: ServerResponse, review: AdmissionReviewResponse, close = false): void {
  const body = JSON.stringify(review);
  // Taken now: Node detaches the socket from the response once it is written.
  const socket = res.req.socket;
  res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
  if (!close) return;
  res.once("finish", () => {
    res.req.resume();
    socket.end();
    setTimeout(() => socket.destroy(), 500).unref();
  });
}
