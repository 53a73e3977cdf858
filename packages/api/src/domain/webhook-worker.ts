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
 * Claimed attempts held here waiting for a slot, as many as this many times the slots (per endpoint
 * and in all): a slot that frees is refilled at once from memory, with no statement, so an endpoint
 * that answers fast takes thousands of deliveries a second, while a claim (five statements) runs at
 * most every REFILL_MS. Beyond that, deliveries wait in the database, due, for any instance.
 */
const WAITING_PER_SLOT = 4;
/**
 * When a claim was used, or an attempt ended at a full endpoint or instance (due deliveries may
 * wait for that slot), the next claim waits this long, so claims come in batches: whatever its
 * size, a claim is five statements on the API's database (fan-outs no one holds, endpoints, due
 * heads, the leasing UPDATE, the claimed rows); at 8 and 10 ms the worker claimed ~100 times a
 * second. An event committed on this instance wakes the worker this soon too: its deliveries are
 * written, claimed for it, with those of the other events of those milliseconds, and leave at once.
 */
const REFILL_MS = 25;

/** Adds `by` to a key's count, dropping the key at zero. */
function count(counts: Map<string, number>, key: string, by: 1 | -1): void {
  const n = (counts.get(key) ?? 0) + by;
  if (n) counts.set(key, n);
  else counts.delete(key);
}

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
  /** Attempts this instance holds at most: in flight, and waiting for a slot. */
  private readonly maxHeld: number;
  private readonly perEndpoint = new Map<string, number>();
  /** Claimed attempts waiting here for a slot, oldest first, and how many of each endpoint. */
  private readonly waiting: ClaimedDelivery[] = [];
  private readonly waitingAt = new Map<string, number>();
  private readonly running = new Set<Promise<void>>();
  private inFlight = 0;
  private timer: NodeJS.Timeout | undefined;
  private timerAt = Infinity;
  private polling = false;
  /** The poll running now, if any: stop() lets it finish (it gives back what it claims once stopped). */
  private pollRun: Promise<void> = Promise.resolve();
  private stopped = false;
  private unwatch: (() => void) | undefined;
  /** When the last claim of due deliveries ran: one runs at least every pollMs. */
  private lastClaim = 0;
  /** A claim may find deliveries due now: the last one was used, or a slot freed that they may wait for. */
  private claimSoon = true;

  constructor(
    private readonly queue: WebhookDeliveryQueue,
    private readonly send: SendWebhook,
    private readonly onError: (err: unknown, what: string) => void,
    private readonly closeSender: () => void,
    opts: Partial<WebhookWorkerOptions> = {},
  ) {
    this.opts = { ...DEFAULTS, ...opts };
    this.maxHeld = this.opts.maxInFlight * (1 + WAITING_PER_SLOT);
  }

  start(): void {
    this.unwatch = this.queue.watch(
      (dueNow) => {
        if (dueNow) this.claimSoon = true;
        this.schedule(REFILL_MS);
      },
      () => this.fullEndpoints(),
    );
    this.schedule(0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.unwatch?.();
    clearTimeout(this.timer);
    this.closeSender();
    await this.pollRun;
    try {
      await this.queue.release(this.waiting.splice(0).map((d) => this.unwait(d)));
      await this.queue.giveBackFresh();
    } catch (err) {
      this.onError(err, "webhook delivery release failed");
    }
    while (this.running.size) await Promise.allSettled([...this.running]);
  }

  /** Polls in `ms` unless a poll is already due sooner. */
  private schedule(ms: number): void {
    if (this.stopped || Date.now() + ms >= this.timerAt) return;
    clearTimeout(this.timer);
    this.timerAt = Date.now() + ms;
    this.timer = setTimeout(() => {
      this.timerAt = Infinity;
      this.pollRun = this.poll();
    }, ms);
  }

  private async poll(): Promise<void> {
    if (this.polling || this.stopped) return;
    this.polling = true;
    try {
      // Deliveries of this instance's commits, written claimed for it: sent, or waiting for a slot
      // here while there is room, given back otherwise.
      await this.queue.release((await this.queue.takeFresh()).filter((d) => !this.take(d)));
      await this.startWaiting();
      // A claim (four statements when it finds some) only when something may be due: not after
      // every attempt, which would be two reads per REFILL_MS under a steady flow of fresh events.
      if (this.claimSoon || Date.now() - this.lastClaim >= this.opts.pollMs) await this.claimDue();
    } catch (err) {
      this.onError(err, "webhook delivery poll failed");
    } finally {
      this.polling = false;
      // More may be due at once (the claim was used, or commits came meanwhile); otherwise at the next poll.
      this.schedule(this.claimSoon || this.queue.hasFresh ? REFILL_MS : Math.max(0, this.lastClaim + this.opts.pollMs - Date.now()));
    }
  }

  private async claimDue(): Promise<void> {
    this.claimSoon = false;
    this.lastClaim = Date.now();
    // Fan-outs of instances that died or run no worker: their deliveries written due, then claimed like any.
    await this.queue.adoptFanOuts();
    const free = this.maxHeld - this.inFlight - this.waiting.length;
    if (free <= 0) return;
    const claimed = await this.queue.claim(free, this.fullEndpoints(), (id) => this.roomAt(id));
    await this.queue.release(claimed.filter((d) => !this.take(d)));
    if (claimed.length > 0) this.claimSoon = true;
  }

  /** How many more attempts of this endpoint this instance takes now: in flight, or waiting for a slot. */
  private roomAt(endpointId: string): number {
    return this.opts.maxPerEndpoint * (1 + WAITING_PER_SLOT) - (this.perEndpoint.get(endpointId) ?? 0) - (this.waitingAt.get(endpointId) ?? 0);
  }

  /** Endpoints with as many attempts here, in flight and waiting, as one may have. */
  private fullEndpoints(): string[] {
    return [...new Set([...this.perEndpoint.keys(), ...this.waitingAt.keys()])].filter((id) => this.roomAt(id) <= 0);
  }

  private hasSlot(endpointId: string): boolean {
    return this.inFlight < this.opts.maxInFlight && (this.perEndpoint.get(endpointId) ?? 0) < this.opts.maxPerEndpoint;
  }

  /**
   * Sends a claimed attempt now (none of its endpoint waits before it), or keeps it waiting for a
   * slot; false when there is no room for it here, or the worker stopped while it was claimed.
   */
  private take(d: ClaimedDelivery): boolean {
    if (this.stopped) return false;
    if (!this.waitingAt.has(d.endpointId) && this.hasSlot(d.endpointId)) {
      this.launch(d);
      return true;
    }
    if (this.roomAt(d.endpointId) <= 0 || this.waiting.length >= this.opts.maxInFlight * WAITING_PER_SLOT) return false;
    this.waiting.push({ ...d, waited: true });
    count(this.waitingAt, d.endpointId, 1);
    return true;
  }

  private unwait(d: ClaimedDelivery): ClaimedDelivery {
    count(this.waitingAt, d.endpointId, -1);
    return d;
  }

  /**
   * Sends the waiting attempts that have a slot now, oldest first; gives back those that waited so
   * long that their lease could end before their answer (any instance claims them again).
   */
  private async startWaiting(): Promise<void> {
    const now = Date.now();
    const late: ClaimedDelivery[] = [];
    // Every late one is given back, also while every slot is taken (then none starts).
    for (let i = 0; i < this.waiting.length; ) {
      const d = this.waiting[i]!;
      if (d.startBy <= now) late.push(this.unwait(this.waiting.splice(i, 1)[0]!));
      else if (this.inFlight < this.opts.maxInFlight && this.hasSlot(d.endpointId)) this.launch(this.unwait(this.waiting.splice(i, 1)[0]!));
      else i++;
    }
    await this.queue.release(late);
  }

  private launch(d: ClaimedDelivery): void {
    this.inFlight++;
    count(this.perEndpoint, d.endpointId, 1);
    const run = this.attempt(d)
      .catch(async (err) => {
        this.onError(err, "webhook delivery failed");
        // Recorded as a failed attempt (backoff, retry window) rather than left to its lease, which
        // would try it again every lease without end. Best effort: the lease remains the fallback.
        if (!this.stopped) await this.queue.failed(d, null, err instanceof Error ? err.message : String(err)).catch(() => undefined);
      })
      .finally(() => {
        this.running.delete(run);
        // A slot freed where deliveries may wait for one in the database (this instance or the endpoint was full).
        const wasFull = this.roomAt(d.endpointId) <= 0 || this.inFlight + this.waiting.length >= this.maxHeld;
        // The freed slot can start a waiting attempt of this endpoint, or of any once all slots were taken.
        const canStart = this.waitingAt.has(d.endpointId) || this.inFlight >= this.opts.maxInFlight;
        this.inFlight--;
        count(this.perEndpoint, d.endpointId, -1);
        if (canStart) this.startWaiting().catch((err) => this.onError(err, "webhook delivery release failed"));
        if (wasFull) {
          this.claimSoon = true;
          this.schedule(REFILL_MS);
        }
      });
    this.running.add(run);
  }

  private async attempt(claimed: ClaimedDelivery): Promise<void> {
    // One that waited here for a slot goes where its endpoint says now: it may have been deleted
    // (its rows with it), disabled, or pointed elsewhere meanwhile.
    const d = claimed.waited ? await this.queue.current(claimed) : claimed;
    if (d === null) return;
    if (!d.endpointEnabled) return this.queue.failed(d, null, "not sent: the endpoint is disabled", true);
    if (d.payload === null) return this.queue.failed(d, null, "not sent: the event is no longer kept (30 days)", true);
    const outcome = await this.send({ url: d.url, secrets: d.secrets, id: d.eventId, payload: d.payload });
    if (outcome.ok) return this.queue.succeeded(d, outcome.status!);
    if (this.stopped) return this.queue.release([d]);
    return this.queue.failed(d, outcome.status, outcome.error ?? "failed");
  }
}
