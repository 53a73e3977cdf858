import http from "node:http";
import https from "node:https";
import type { LookupFunction } from "node:net";
import { Webhook } from "standardwebhooks";
import { AddressRefused, resolveWebhookHost } from "./addresses.js";

/** One message to one endpoint: the event's JSON, signed with the endpoint's secret. */
export interface WebhookMessage {
  url: string;
  secret: string;
  /** The event id: `webhook-id`, the same on every attempt, so receivers can deduplicate. */
  id: string;
  payload: string;
}

/** How an attempt went: success is a 2xx answer; `status` is null when none came. */
export interface SendOutcome {
  ok: boolean;
  status: number | null;
  error: string | null;
}

export type SendWebhook = (message: WebhookMessage) => Promise<SendOutcome>;

/** A lookup that answers the address already checked, so the connection goes where the check looked. */
const pinned =
  (address: string, family: 4 | 6): LookupFunction =>
  (_host, options, done) => {
    if ((options as { all?: boolean }).all) (done as (e: null, a: { address: string; family: number }[]) => void)(null, [{ address, family }]);
    else done(null, address, family);
  };

/**
 * Sends webhooks over HTTP(S), Standard Webhooks style (webhook-id, webhook-timestamp,
 * webhook-signature: v1,<base64 HMAC-SHA256>): the host is resolved and checked (SSRF) on every
 * attempt and the connection pinned to the checked address; redirects are not followed (a 3xx is
 * a failure); an attempt without a whole answer within `timeoutMs` fails. Connections are kept
 * alive per host. `close()` ends them, failing attempts in flight.
 */
export class WebhookSender {
  private readonly agents = { "http:": new http.Agent({ keepAlive: true }), "https:": new https.Agent({ keepAlive: true }) };

  constructor(private readonly opts: { timeoutMs: number; allowPrivate: boolean }) {}

  readonly send: SendWebhook = async (m) => {
    const url = new URL(m.url);
    let target;
    try {
      [target] = await resolveWebhookHost(url.hostname, this.opts.allowPrivate);
    } catch (err) {
      if (err instanceof AddressRefused) return { ok: false, status: null, error: `refused: ${err.message}` };
      throw err;
    }
    const timestamp = new Date();
    const headers = {
      "content-type": "application/json",
      "content-length": Buffer.byteLength(m.payload),
      "user-agent": "cardctl-webhooks/1",
      "webhook-id": m.id,
      "webhook-timestamp": String(Math.floor(timestamp.getTime() / 1000)),
      "webhook-signature": new Webhook(m.secret).sign(m.id, timestamp, m.payload),
    };
    const protocol = url.protocol as "http:" | "https:";
    const request = protocol === "https:" ? https.request : http.request;
    return new Promise<SendOutcome>((resolve) => {
      let settled = false;
      const finish = (outcome: SendOutcome) => {
        clearTimeout(timer);
        if (!settled) resolve(outcome);
        settled = true;
      };
      const req = request(url, { method: "POST", headers, agent: this.agents[protocol], lookup: pinned(target!.address, target!.family) });
      const timer = setTimeout(() => req.destroy(new Error(`no answer within ${this.opts.timeoutMs} ms`)), this.opts.timeoutMs);
      req.on("error", (err) => finish({ ok: false, status: null, error: err.message }));
      req.on("response", (res) => {
        const status = res.statusCode ?? 0;
        // The answer counts once it is whole (its body is read and dropped), within the timeout.
        res.on("end", () => {
          if (status >= 200 && status < 300) finish({ ok: true, status, error: null });
          else if (status >= 300 && status < 400) finish({ ok: false, status, error: `redirect (HTTP ${status}${res.headers.location ? ` to ${res.headers.location}` : ""}) not followed` });
          else finish({ ok: false, status, error: `HTTP ${status}` });
        });
        res.on("error", (err) => finish({ ok: false, status, error: err.message }));
        res.on("close", () => finish({ ok: false, status, error: "the connection closed before the whole answer" }));
        res.resume();
      });
      req.end(m.payload);
    });
  };

  close(): void {
    for (const agent of Object.values(this.agents)) agent.destroy();
  }
}
