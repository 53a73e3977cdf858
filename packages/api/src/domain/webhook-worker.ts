import type { SendWebhook } from "../webhooks/sender.js";
import type { ClaimedDelivery, WebhookDeliveryQueue } from "./webhook-deliveries.js";

export interface WebhookWorkerOptions {
  /** Attempts in flight on this instance, in all. */
  maxInFlight: number;
  /** Attempts in flight to one endpoint: a slow or hanging receiver holds this many, never more. */
  maxPerEndpoint: number;
  /** How often an idle worker looks for due deliveries it was not woken for (other instances' events, retries). */
  pollMs: number;
}

const DEFAULTS: WebhookWorkerOptions = { maxInFlight: 64, maxPerEndpoint: 16, pollMs: 500 };
/**
 * After an attempt ends, the next claim waits this long, so claims come in batches: whatever its
 * size, a claim is four statements on the API's database (endpoints, due heads, the leasing UPDATE,
 * the claimed rows). With 16 attempts in flight per endpoint an endpoint still takes up to 640
 * deliveries/s; at 8 and 10 ms the worker claimed ~100 times a second. An event committed on this
 * instance wakes the worker this soon too: its deliveries leave within milliseconds, not at the
 * next poll, and under load the worker still claims at most once per REFILL_MS.
 */
const REFILL_MS = 25;
const PURGE_EVERY_MS = 3600 * 1000;

/**
 * Delivers webhooks from this instance, beside every other instance: claims due deliveries in
 * batches (leased, see WebhookDeliveryQueue), sends each without awaiting it in the claim loop, and
 * records the outcome. Concurrency is bounded overall and per endpoint, and sending is all
 * asynchronous I/O with a deadline, so a slow or hanging receiver delays neither API requests nor
 * other receivers. `stop()` claims nothing more, ends connections, gives back unfinished attempts
 * and waits for the outcomes being recorded.
 */
export class WebhookWorker {
  private readonly opts: WebhookWorkerOptions;
  private readonly perEndpoint = new Map<string, number>();
  private readonly running = new Set<Promise<void>>();
  private inFlight = 0;
  private timer: NodeJS.Timeout | undefined;
  private timerAt = Infinity;
  private purgeTimer: NodeJS.Timeout | undefined;
  private polling = false;
  private stopped = false;
  private unwatch: (() => void) | undefined;

  constructor(
    private readonly queue: WebhookDeliveryQueue,
    private readonly send: SendWebhook,
    private readonly onError: (err: unknown, what: string) => void,
    private readonly closeSender: () => void,
    opts: Partial<WebhookWorkerOptions> = {},
  ) {
    this.opts = { ...DEFAULTS, ...opts };
  }

  start(): void {
    this.unwatch = this.queue.watch(() => this.schedule(REFILL_MS));
    this.schedule(0);
    this.purgeTimer = setInterval(() => this.queue.purgeExpired().catch((err) => this.onError(err, "webhook delivery purge failed")), PURGE_EVERY_MS);
    this.purgeTimer.unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.unwatch?.();
    clearTimeout(this.timer);
    clearInterval(this.purgeTimer);
    this.closeSender();
    while (this.running.size) await Promise.allSettled([...this.running]);
  }

  /** Polls in `ms` unless a poll is already due sooner. */
  private schedule(ms: number): void {
    if (this.stopped || Date.now() + ms >= this.timerAt) return;
    clearTimeout(this.timer);
    this.timerAt = Date.now() + ms;
    this.timer = setTimeout(() => {
      this.timerAt = Infinity;
      void this.poll();
    }, ms);
  }

  private async poll(): Promise<void> {
    if (this.polling || this.stopped) return;
    this.polling = true;
    let full = false;
    try {
      const free = this.opts.maxInFlight - this.inFlight;
      if (free > 0) {
        const busy = [...this.perEndpoint].filter(([, n]) => n >= this.opts.maxPerEndpoint).map(([id]) => id);
        const claimed = await this.queue.claim(free, busy, (id) => this.opts.maxPerEndpoint - (this.perEndpoint.get(id) ?? 0));
        for (const d of claimed) this.launch(d);
        full = claimed.length > 0;
      }
    } catch (err) {
      this.onError(err, "webhook delivery poll failed");
    } finally {
      this.polling = false;
      // More may be due at once (the batch was used); otherwise look again later.
      this.schedule(full ? REFILL_MS : this.opts.pollMs);
    }
  }

  private launch(d: ClaimedDelivery): void {
    this.inFlight++;
    this.perEndpoint.set(d.endpointId, (this.perEndpoint.get(d.endpointId) ?? 0) + 1);
    const run = this.attempt(d)
      .catch((err) => this.onError(err, "webhook delivery failed"))
      .finally(() => {
        this.running.delete(run);
        this.inFlight--;
        const left = this.perEndpoint.get(d.endpointId)! - 1;
        if (left) this.perEndpoint.set(d.endpointId, left);
        else this.perEndpoint.delete(d.endpointId);
        this.schedule(REFILL_MS);
      });
    this.running.add(run);
  }

  private async attempt(d: ClaimedDelivery): Promise<void> {
    if (!d.endpointEnabled) return this.queue.failed(d, null, "not sent: the endpoint is disabled", true);
    if (d.payload === null) return this.queue.failed(d, null, "not sent: the event is no longer kept (30 days)", true);
    const outcome = await this.send({ url: d.url, secret: d.secret, id: d.eventId, payload: d.payload });
    if (outcome.ok) return this.queue.succeeded(d, outcome.status!);
    if (this.stopped) return this.queue.release(d);
    return this.queue.failed(d, outcome.status, outcome.error ?? "failed");
  }
}
