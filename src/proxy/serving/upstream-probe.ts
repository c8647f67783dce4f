/**
 * Whether the apiserver the proxy forwards to answers at all. A wrong
 * `--server` (nothing listening, an unknown host, https to an http server)
 * used to show nowhere: the proxy logged "proxy ready", and the controller
 * later met only client-go's "an error on the server ("unknown")".
 *
 * The probe asks `GET <upstream>/version` without credentials: any HTTP
 * answer, a 401 included, means the address, the scheme and the TLS trust
 * are right, which is all it judges. Until an answer comes the proxy's
 * readiness says why not, one log line names the upstream and the error
 * (again only when the error changes, not on every retry), and it probes
 * again with a doubling backoff. The proxy keeps listening meanwhile: the
 * controller's requests get an answer that names the upstream (routing.ts).
 * Once answered it probes again only when a forwarded request fails
 * ({@link UpstreamProbe.suspect}).
 */
import type { IncomingMessage } from "node:http";
import * as https from "node:https";
import { http } from "../../node-builtins.ts";
import type { Logger } from "../../log.ts";
import type { ReadinessCheck } from "../reporting/admin.ts";
import type { ProxyClock } from "../handoff/ledger-driver.ts";
import { describeUpstreamError, type Upstream } from "./upstream.ts";

export interface UpstreamProbeOptions {
  readonly upstream: Upstream;
  readonly logger: Logger;
  readonly clock: ProxyClock;
  /** How long one probe may wait for an answer. Default 5 s. */
  readonly timeoutMs?: number;
  /** First wait before probing again; doubles up to {@link maxBackoffMs}. Default 1 s. */
  readonly backoffMs?: number;
  /** Default 30 s. */
  readonly maxBackoffMs?: number;
  /** One probe: resolves when the upstream answered, rejects with why not. Default: GET /version. */
  readonly ask?: (upstream: Upstream, timeoutMs: number, clock: ProxyClock) => Promise<void>;
}

/** `GET <upstream>/version`, answered with anything at all. */
export function askVersion(upstream: Upstream, timeoutMs: number, clock: ProxyClock): Promise<void> {
  const url = new URL(`${upstream.url.pathname.replace(/\/$/, "")}/version`, upstream.url);
  const get = url.protocol === "https:" ? https.get : http.get;
  return new Promise((resolve, reject) => {
    const req = get(url, { agent: upstream.agent }, (res: IncomingMessage) => {
      cancel();
      res.resume();
      resolve();
    });
    const cancel = clock.timer(timeoutMs, () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on("error", (e) => {
      cancel();
      reject(e);
    });
  });
}

export class UpstreamProbe {
  readonly #o: UpstreamProbeOptions;
  /** undefined: answered; otherwise why not (before the first answer: not probed yet). */
  #failure: string | undefined = "not probed yet";
  #logged: string | undefined;
  #backoffMs: number;
  #probing = false;
  #cancelRetry: (() => void) | undefined;
  #stopped = false;

  constructor(o: UpstreamProbeOptions) {
    this.#o = o;
    this.#backoffMs = o.backoffMs ?? 1000;
  }

  /** For the admin listener's /readyz. */
  readonly readiness: ReadinessCheck = {
    name: "upstream",
    check: () => (this.#failure === undefined ? undefined : `${this.#o.upstream.url.origin}: ${this.#failure}`),
  };

  /** Probes now, and again with backoff until the upstream answers. */
  start(): void {
    this.#probe();
  }

  /** A forwarded request failed to reach the upstream: probe again, unless a probe is already due. */
  suspect(): void {
    if (!this.#probing && this.#cancelRetry === undefined) this.#probe();
  }

  stop(): void {
    this.#stopped = true;
    this.#cancelRetry?.();
    this.#cancelRetry = undefined;
  }

  #probe(): void {
    if (this.#stopped) return;
    this.#cancelRetry = undefined;
    this.#probing = true;
    const { upstream, clock } = this.#o;
    (this.#o.ask ?? askVersion)(upstream, this.#o.timeoutMs ?? 5000, clock).then(
      () => this.#answered(),
      (e: unknown) => this.#failed(describeUpstreamError(e)),
    );
  }

  #answered(): void {
    this.#probing = false;
    if (this.#logged !== undefined) this.#o.logger.info({ upstream: this.#o.upstream.url.origin }, "upstream answers again");
    this.#failure = this.#logged = undefined;
    this.#backoffMs = this.#o.backoffMs ?? 1000;
  }

  #failed(why: string): void {
    this.#probing = false;
    this.#failure = why;
    const retryMs = this.#backoffMs;
    this.#backoffMs = Math.min(this.#backoffMs * 2, this.#o.maxBackoffMs ?? 30_000);
    if (why !== this.#logged) {
      this.#logged = why;
      const origin = this.#o.upstream.url.origin;
      this.#o.logger.error({ upstream: origin, err: why, retryMs }, `upstream ${origin} does not answer: ${why}; not ready, probing again with backoff`);
    }
    if (!this.#stopped) this.#cancelRetry = this.#o.clock.timer(retryMs, () => this.#probe());
  }
}
