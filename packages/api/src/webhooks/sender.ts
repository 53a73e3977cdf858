import { createHmac } from "node:crypto";
import type { LookupFunction } from "node:net";
import { Agent, type Dispatcher } from "undici";
import { AddressRefused, resolveWebhookHost } from "./addresses.js";

/** One message to one endpoint: the event's JSON, signed with the endpoint's secret. */
export interface WebhookMessage {
  url: string;
  /** The endpoint's secret, then (after a rotation, until it expires) the previous one: one signature each. */
  secrets: string[];
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

/**
 * The connections' own lookup: a host name is resolved and checked as it is connected to, and
 * the connection goes only to the addresses the check passed (no second lookup, so DNS rebinding
 * between check and connect cannot happen; the attempt's own check just before shares its
 * answer). IP literals are connected to without a lookup; the attempt checked them before sending.
 */
export const checkedLookup =
  (allowPrivate: boolean, timeoutMs: number): LookupFunction =>
  (host, options, done) => {
    resolveWebhookHost(host, allowPrivate, timeoutMs).then(
      (addresses) => {
        if ((options as { all?: boolean }).all) (done as (e: null, a: typeof addresses) => void)(null, addresses);
        else done(null, addresses[0]!.address, addresses[0]!.family);
      },
      (err: Error) => done(err, "", 0),
    );
  };

/**
 * The Standard Webhooks signature, `v1,<base64 HMAC-SHA256 of "id.timestamp.payload">` keyed by
 * the secret's bytes (after `whsec_`), with node's HMAC: the `standardwebhooks` package signs with
 * a SHA-256 in JavaScript, 3× the CPU (14 µs against 5 µs a delivery). Receivers verify with that
 * package (the tests' receiver does).
 */
export function signWebhook(secret: string, id: string, timestamp: number, payload: string): string {
  const key = Buffer.from(secret.startsWith("whsec_") ? secret.slice(6) : secret, "base64");
  return `v1,${createHmac("sha256", key).update(`${id}.${timestamp}.${payload}`).digest("base64")}`;
}

/** Why an attempt got no answer, as a delivery's last_error says it. */
const failure = (err: unknown): string => {
  const e = err as { message?: string; cause?: unknown };
  if (err instanceof AddressRefused) return `refused: ${err.message}`;
  return e.cause instanceof AddressRefused ? `refused: ${e.cause.message}` : (e.message ?? String(err));
};

/** A whole answer's outcome: a 2xx is success; a redirect is not followed. */
function outcomeOf(status: number, location: string | undefined): SendOutcome {
  if (status >= 200 && status < 300) return { ok: true, status, error: null };
  if (status >= 300 && status < 400) return { ok: false, status, error: `redirect (HTTP ${status}${location ? ` to ${location}` : ""}) not followed` };
  return { ok: false, status, error: `HTTP ${status}` };
}

/**
 * Sends webhooks over HTTP(S), Standard Webhooks style (webhook-id, webhook-timestamp,
 * webhook-signature: v1,<base64 HMAC-SHA256>), with undici: about half the CPU per request of
 * node:http's client (BENCHMARKS.md, fix 31). The URL is checked (SSRF: https only and public
 * addresses, unless WEBHOOK_ALLOW_PRIVATE) on every attempt and on every new connection (its
 * lookup); redirects are not followed (a 3xx is a failure); an attempt without a whole answer
 * within `timeoutMs` fails. Connections are kept alive per origin.
 * `close()` ends them, failing attempts in flight.
 */
export class WebhookSender {
  private readonly agent: Agent;

  constructor(private readonly opts: { timeoutMs: number; allowPrivate: boolean }) {
    this.agent = new Agent({ connect: { lookup: checkedLookup(opts.allowPrivate, opts.timeoutMs) } });
  }

  readonly send: SendWebhook = async (m) => {
    const url = new URL(m.url);
    // The deadline covers the host's check too: a name whose DNS never answers fails in time.
    const deadline = Date.now() + this.opts.timeoutMs;
    // An endpoint made while WEBHOOK_ALLOW_PRIVATE was set gets nothing in plain text once it is not.
    if (url.protocol !== "https:" && !this.opts.allowPrivate)
      return { ok: false, status: null, error: `refused: ${url.protocol}// is allowed only when the server sets WEBHOOK_ALLOW_PRIVATE (use https://)` };
    try {
      await resolveWebhookHost(url.hostname, this.opts.allowPrivate, this.opts.timeoutMs);
    } catch (err) {
      if (err instanceof AddressRefused) return { ok: false, status: null, error: failure(err) };
      throw err;
    }
    const timestamp = Math.floor(Date.now() / 1000);
    const headers = {
      "content-type": "application/json",
      "user-agent": "cardctl-webhooks/1",
      "webhook-id": m.id,
      "webhook-timestamp": String(timestamp),
      // Space-separated signatures (Standard Webhooks): a receiver holding either secret verifies.
      "webhook-signature": m.secrets.map((secret) => signWebhook(secret, m.id, timestamp, m.payload)).join(" "),
    };
    return this.post(url, headers, m.payload, Math.max(deadline - Date.now(), 1));
  };

  /**
   * One POST through the agent's dispatch() with a handler of callbacks: the answer's body is
   * dropped as it arrives, with no stream or promise per chunk (half the CPU of `request()`, whose
   * body is a Readable). The deadline covers the whole answer; if it passes before the request has
   * left (still connecting), the request is aborted as it starts.
   */
  private post(url: URL, headers: Record<string, string>, body: string, timeoutMs: number): Promise<SendOutcome> {
    return new Promise((resolve) => {
      let controller: Dispatcher.DispatchController | undefined;
      let status: number | null = null;
      let location: string | undefined;
      let timedOut: Error | undefined;
      const finish = (outcome: SendOutcome) => {
        clearTimeout(timer);
        resolve(outcome);
      };
      const timer = setTimeout(() => {
        timedOut = new Error(`no answer within ${this.opts.timeoutMs} ms`);
        controller?.abort(timedOut);
        resolve({ ok: false, status, error: timedOut.message });
      }, timeoutMs);
      this.agent.dispatch(
        { origin: url.origin, path: url.pathname + url.search, method: "POST", headers, body },
        {
          onRequestStart: (c) => {
            controller = c;
            if (timedOut) c.abort(timedOut);
          },
          onResponseStart: (_c, statusCode, responseHeaders) => {
            status = statusCode;
            location = responseHeaders.location as string | undefined;
          },
          // The answer counts once it is whole (its body is read and dropped), within the timeout.
          onResponseEnd: () => finish(outcomeOf(status!, location)),
          onResponseError: (_c, err) => finish({ ok: false, status, error: failure(err) }),
        },
      );
    });
  }

  close(): void {
    void this.agent.destroy().catch(() => undefined);
  }
}
