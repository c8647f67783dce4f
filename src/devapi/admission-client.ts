/**
 * devapi's outbound half of admission: POSTs an AdmissionReview to a
 * mutating webhook over verified HTTPS and returns its parsed answer, with
 * a bound on the answer's size and kept-alive connections per trust. Apart
 * from server.ts, which serves requests and only calls out through
 * {@link callWebhook}, and from admission.ts, which decides what is sent
 * and what the answer means without any socket.
 */
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import type { MutatingWebhook } from "./admission.ts";

// The apiserver's limit on a webhook's answer is the same order: an object
// plus its patch. More is a broken webhook, not a reason to buffer.
const MAX_WEBHOOK_ANSWER_BYTES = 8 * 1024 * 1024;

// Kept-alive connections per trust (caBundle, TLS name), as the apiserver's
// webhook client keeps them: a handshake per write would dominate a test
// that writes through a webhook in a loop. A few trusts per process at most;
// the oldest is dropped past that.
const webhookAgents = new Map<string, HttpsAgent>();
function webhookAgent(hook: MutatingWebhook): HttpsAgent {
  const key = JSON.stringify([hook.caBundle ?? "", hook.serverName ?? ""]);
  let agent = webhookAgents.get(key);
  if (agent === undefined) {
    agent = new HttpsAgent({ keepAlive: true, ...(hook.caBundle === undefined ? {} : { ca: hook.caBundle }), ...(hook.serverName === undefined ? {} : { servername: hook.serverName }), rejectUnauthorized: true });
    webhookAgents.set(key, agent);
    for (const [k, a] of webhookAgents) {
      if (webhookAgents.size <= 16) break;
      a.destroy();
      webhookAgents.delete(k);
    }
  }
  return agent;
}

/**
 * POSTs `review` to the webhook over verified HTTPS; resolves with the
 * parsed answer. Rejects (never throws) on a non-https URL, a TLS or
 * connection failure, the hook's timeout (default 10 s), a status other
 * than 200, an answer over the limit, or an answer that is not JSON.
 */
export function callWebhook(hook: MutatingWebhook, review: unknown): Promise<unknown> {
  const url = new URL(hook.url);
  if (url.protocol !== "https:") return Promise.reject(new Error(`webhook URL ${hook.url} is not https`));
  const body = Buffer.from(JSON.stringify(review));
  const timeoutMs = hook.timeoutMs ?? 10_000;
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      url,
      {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json", "content-length": body.length },
        ...(hook.caBundle === undefined ? {} : { ca: hook.caBundle }),
        ...(hook.serverName === undefined ? {} : { servername: hook.serverName }),
        rejectUnauthorized: true,
        agent: webhookAgent(hook),
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on("data", (c: Buffer) => {
          size += c.length;
          if (size > MAX_WEBHOOK_ANSWER_BYTES) req.destroy(new Error(`answer larger than ${MAX_WEBHOOK_ANSWER_BYTES} bytes`));
          else chunks.push(c);
        });
        res.on("error", reject);
        res.on("end", () => {
          if (res.statusCode !== 200) return reject(new Error(`the server responded with HTTP ${String(res.statusCode)}`));
          try {
            resolve(JSON.parse(Buffer.concat(chunks).toString("utf8")) as unknown);
          } catch {
            reject(new Error("the answer is not JSON"));
          }
        });
      },
    );
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`Post "${hook.url}": context deadline exceeded (${timeoutMs} ms)`)));
    req.on("error", reject);
    req.end(body);
  });
}
