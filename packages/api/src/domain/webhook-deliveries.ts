import type { DataSource } from "typeorm";
import { databaseKind } from "../db/datasource.js";
import { WebhookEndpointEntity, type EventRecord } from "../db/entities.js";
import { fastRepository, placeholders, queryRows, runSql, type Statement } from "../db/fast.js";
import { backoffMs } from "./backoff.js";
import type { Deps } from "./deps.js";
import { addEventFanOut, commitWithEvents, eventView, SYSTEM, type EventStatement } from "./events.js";
import { randomToken, timeStamp } from "./ids.js";
import { endpointView, previousSecretUntil } from "./webhook-views.js";

/** Retries are at most this far apart (the doubling stops there). */
const MAX_RETRY_DELAY_MS = 6 * 3600 * 1000;
/** Finished deliveries are kept as long as events, then purged in batches. */
const DELIVERY_RETENTION_MS = 30 * 24 * 3600 * 1000;
const PURGE_BATCH = 1000;
/** `whd_` and the 16 characters of an event's deliveries (their ids end with the endpoint id's last 8). */
const PREFIX_LENGTH = 20;
/** Events whose fresh deliveries are read at once (two parameters each); the rest at the next poll. */
const FRESH_PER_READ = 500;
/** Endpoints looked at per claim; the next claim goes on after the last one (round robin). */
const ENDPOINTS_PER_CLAIM = 200;

/** Webhook bodies of a batch of deliveries: an event going to several endpoints is made JSON once. */
function webhookBodies(): (event: EventRecord) => string {
  const made = new Map<string, string>();
  return (event) => {
    let body = made.get(event.id);
    if (body === undefined) made.set(event.id, (body = JSON.stringify(eventView(event))));
    return body;
  };
}

/** An endpoint's columns that sign its deliveries. */
interface SigningEndpoint {
  secret: string;
  previous_secret: string | null;
  previous_secret_expires_at: number | string | null;
}

/** The secrets a delivery is signed with now: the endpoint's, and the previous one until its rotation's overlap ends. */
const signingSecrets = (e: SigningEndpoint): string[] => (previousSecretUntil(e) === null ? [e.secret] : [e.secret, e.previous_secret!]);

/** The queue whose worker runs on this instance, per database: it sends what is committed here. */
const sendingHere = new WeakMap<DataSource, WebhookDeliveryQueue>();

/**
 * Wakes the worker running on this instance, if any, after a delivery was made due here (a manual
 * retry): it claims within 25 ms rather than at its next poll.
 */
export function wakeWorkerHere(ds: DataSource): void {
  sendingHere.get(ds)?.wake();
}

/** Deliveries of one event committed here, leased to this instance by the fan-out. */
export interface Fresh {
  /** The ids' common start: `whd_` and the event's random part (see fanOutStatement). */
  prefix: string;
  leaseToken: string;
  event: Omit<EventRecord, "seq">;
}

/**
 * The fan-out of the outbox: with every event, in its transaction, one delivery row per enabled
 * endpoint of the event's account and mode that takes its type. One INSERT … SELECT on the
 * endpoints' (account_id, mode, status) index: an account without endpoints costs one empty index
 * range, and endpoints made or deleted on any instance count at once (no cache to go stale).
 * A delivery's id is a part per event (time and random) plus the endpoint id's last 8 characters.
 *
 * On an instance whose worker runs, the rows are written already claimed by it (attempt 1, leased,
 * its token), and it is told of them once they commit: it sends them without a claim's writes and
 * reads. If the instance dies first, the lease ends and any instance claims them (at least once).
 */
function fanOutStatement(ds: DataSource, event: Omit<EventRecord, "seq">): EventStatement {
  // The endpoint id's last 8 characters: random ones (its first ones are the millisecond it was made, see newId).
  const id = databaseKind(ds) === "mysql" ? "CONCAT(?, RIGHT(id, 8))" : "(? || substr(id, -8))";
  const here = sendingHere.get(ds);
  const fresh: Fresh = { prefix: `whd_${timeStamp()}${randomToken(8)}`, leaseToken: randomToken(24), event };
  // 1 where the row is written claimed: with a worker here, unless its endpoint is already at its
  // limit here (that row is left due, for a claim when a slot frees).
  const busy = here?.busyHere() ?? [];
  const claimed = !here ? "0" : busy.length ? `(id NOT IN (${placeholders(busy)}))` : "1";
  return {
    sql:
      "INSERT INTO webhook_deliveries (id, endpoint_id, account_id, mode, event_id, event_type, status, attempts, next_attempt_at, lease_token, created_at, updated_at) " +
      `SELECT ${id}, id, account_id, mode, ?, ?, 'pending', ${claimed}, ? + ${claimed} * ?, CASE WHEN ${claimed} = 1 THEN ? END, ?, ? FROM webhook_endpoints ` +
      `WHERE account_id = ? AND mode = ? AND status = 'enabled' AND (events = '["*"]' OR INSTR(events, ?) > 0)`,
    params: [
      fresh.prefix,
      event.id,
      event.type,
      ...busy,
      event.created_at,
      ...busy,
      here?.leaseMs ?? 0,
      ...busy,
      fresh.leaseToken,
      event.created_at,
      event.created_at,
      event.account_id,
      event.mode,
      JSON.stringify(event.type),
    ],
    afterCommit: here && ((result) => result.affected && here.committed(fresh)),
  };
}
addEventFanOut((ds, event) => [fanOutStatement(ds, event)]);

/**
 * Fails the pending deliveries of an endpoint being disabled, but for attempts in flight (leased):
 * their outcome is recorded as it comes, and one that fails is not sent again (its endpoint is
 * disabled by then).
 */
export const failPendingStatement = (endpointId: string, why: string, now: number): Statement => ({
  sql: "UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL, lease_token = NULL, last_error = ?, updated_at = ? WHERE endpoint_id = ? AND status = 'pending' AND (lease_token IS NULL OR next_attempt_at <= ?)",
  params: [why, now, endpointId, now],
});

/**
 * The first statement of every transaction that writes an account's webhook endpoints: the
 * account's row locked, so those transactions queue. On MySQL an event's fan-out share-locks the
 * account's endpoints; two transactions that each write one endpoint and fan out an event would
 * otherwise deadlock (each holding its own endpoint, waiting for the other's).
 */
export const lockEndpointsOf = (accountId: string): Statement => ({ sql: "UPDATE accounts SET id = id WHERE id = ?", params: [accountId] });

/** A claimed attempt: what to send, and where. */
export interface ClaimedDelivery {
  id: string;
  endpointId: string;
  /** The fencing token of this attempt: only its holder records the outcome. */
  leaseToken: string;
  attempts: number;
  retryUntil: number | null;
  createdAt: number;
  url: string;
  /** What signs it: the endpoint's secret, and the previous one while a rotation's overlap lasts. */
  secrets: string[];
  endpointEnabled: boolean;
  /** The event's id and JSON (null when it is no longer kept). */
  eventId: string;
  payload: string | null;
}

/**
 * The delivery queue. Any number of instances work it at once: an attempt is claimed with a
 * conditional UPDATE that moves next_attempt_at to the end of a lease and sets a fresh token, so
 * one instance makes it; if that instance dies, the row is due again when the lease ends (at least
 * once). Failures are retried with exponential backoff until the retry window (3 days) has passed;
 * then the delivery fails and its endpoint is disabled, with a `webhook_endpoint.disabled` event.
 */
export class WebhookDeliveryQueue {
  constructor(private readonly deps: Deps) {}

  private get ds() {
    return this.deps.ds;
  }
  private get config() {
    return this.deps.config.webhooks;
  }
  private nextEndpoint = 0;
  private fresh: Fresh[] = [];
  private onFresh: ((dueNow: boolean) => void) | undefined;
  /** The endpoints whose attempts in flight here are at their limit (the worker's). */
  busyHere: () => string[] = () => [];

  /** A claim outlives any attempt (the timeout) by a margin; after it, the delivery is due again. */
  get leaseMs() {
    return this.config.timeoutMs + 60_000;
  }

  /**
   * From now on, events committed on this instance have their deliveries claimed for it as they are
   * written (except those of the `busy` endpoints), and `listener` is called after each such commit
   * (takeFresh has them), or with `dueNow` after a delivery was made due here (wakeWorkerHere).
   * Returns the end.
   */
  watch(listener: (dueNow: boolean) => void, busy: () => string[]): () => void {
    sendingHere.set(this.ds, this);
    this.onFresh = listener;
    this.busyHere = busy;
    return () => {
      if (sendingHere.get(this.ds) === this) sendingHere.delete(this.ds);
      this.onFresh = undefined;
    };
  }

  /** Tells the worker here that a delivery was made due now. */
  wake(): void {
    this.onFresh?.(true);
  }

  /** Told by the fan-out once an event's deliveries, claimed for this instance, have committed. */
  committed(fresh: Fresh): void {
    this.fresh.push(fresh);
    // Written while the worker ran and committed once it had stopped: given back at once.
    if (this.onFresh) this.onFresh(false);
    // Should that fail, their lease ends and any instance claims them.
    else void this.takeFresh().then((left) => this.release(left)).catch(() => undefined);
  }

  get hasFresh(): boolean {
    return this.fresh.length > 0;
  }

  /**
   * The deliveries of events committed here since the last call, claimed for this instance as they
   * were written: one read of their rows (ranges of the id index), one of their endpoints; the
   * events are in memory. A row whose endpoint was deleted meanwhile is left to its lease.
   */
  async takeFresh(): Promise<ClaimedDelivery[]> {
    const fresh = new Map(this.fresh.splice(0, FRESH_PER_READ).map((f) => [f.prefix, f]));
    if (fresh.size === 0) return [];
    // Two reads, not a join: with a join the planner may read the deliveries through the endpoint
    // index (every delivery of each endpoint) rather than by these ranges of the id index.
    const rows: { id: string; endpoint_id: string; lease_token: string | null; created_at: number }[] = await queryRows(
      this.ds,
      `SELECT id, endpoint_id, lease_token, created_at FROM webhook_deliveries WHERE ${[...fresh.keys()].map(() => "(id >= ? AND id < ?)").join(" OR ")}`,
      [...fresh.keys()].flatMap((prefix) => [prefix, `${prefix}~`]),
    );
    if (rows.length === 0) return [];
    const endpointIds = [...new Set(rows.map((r) => r.endpoint_id))];
    const endpoints = new Map<string, SigningEndpoint & { url: string; status: string }>(
      (
        await queryRows(
          this.ds,
          `SELECT id, url, secret, previous_secret, previous_secret_expires_at, status FROM webhook_endpoints WHERE id IN (${placeholders(endpointIds)})`,
          endpointIds,
        )
      ).map((e: SigningEndpoint & { id: string; url: string; status: string }) => [e.id, e]),
    );
    const payloadOf = webhookBodies();
    return rows.flatMap((r) => {
      const f = fresh.get(r.id.slice(0, PREFIX_LENGTH));
      const w = endpoints.get(r.endpoint_id);
      if (!f || !w || r.lease_token !== f.leaseToken) return [];
      const payload = payloadOf({ ...f.event, seq: 0 });
      return [{ id: r.id, endpointId: r.endpoint_id, leaseToken: f.leaseToken, attempts: 1, retryUntil: null, createdAt: Number(r.created_at), url: w.url, secrets: signingSecrets(w), endpointEnabled: w.status === "enabled", eventId: f.event.id, payload }];
    });
  }

  /**
   * Up to ENDPOINTS_PER_CLAIM endpoints (of every account), going round from the last claim's.
   * Read on every claim (a small table), so an endpoint made on any instance counts at once.
   */
  private async endpointsToClaim(): Promise<string[]> {
    const ids: string[] = (await queryRows(this.ds, "SELECT id FROM webhook_endpoints ORDER BY id", [])).map((r: { id: string }) => r.id);
    if (ids.length <= ENDPOINTS_PER_CLAIM) return ids;
    const start = this.nextEndpoint % ids.length;
    this.nextEndpoint = start + ENDPOINTS_PER_CLAIM;
    return [...ids.slice(start), ...ids.slice(0, start)].slice(0, ENDPOINTS_PER_CLAIM);
  }

  /**
   * Claims up to `limit` due deliveries, at most `perEndpoint(endpointId)` of each endpoint, none of
   * `skipEndpoints` (those already busy here), oldest due first. Claimed per endpoint, in one query
   * of each endpoint's due head (one range of the pending index each): a hanging endpoint's backlog
   * is never read while it is busy, however long it grows.
   */
  async claim(limit: number, skipEndpoints: string[], perEndpoint: (endpointId: string) => number): Promise<ClaimedDelivery[]> {
    const now = Date.now();
    const skip = new Set(skipEndpoints);
    const room = new Map<string, number>();
    for (const id of await this.endpointsToClaim()) {
      const n = Math.min(limit, perEndpoint(id));
      if (!skip.has(id) && n > 0) room.set(id, n);
    }
    if (room.size === 0) return [];
    const heads = [...room].map(
      ([, n], i) => `SELECT * FROM (SELECT id, next_attempt_at FROM webhook_deliveries WHERE status = 'pending' AND endpoint_id = ? AND next_attempt_at <= ? ORDER BY next_attempt_at LIMIT ${n}) h${i}`,
    );
    const due: { id: string; next_attempt_at: number }[] = await queryRows(this.ds, heads.join(" UNION ALL "), [...room.keys()].flatMap((id) => [id, now]));
    const ids = due
      .sort((a, b) => Number(a.next_attempt_at) - Number(b.next_attempt_at))
      .slice(0, limit)
      .map((d) => d.id);
    if (ids.length === 0) return [];
    const token = randomToken(24);
    const list = placeholders(ids);
    const claimed = await runSql(
      this.ds,
      `UPDATE webhook_deliveries SET next_attempt_at = ?, lease_token = ?, attempts = attempts + 1, updated_at = ? WHERE id IN (${list}) AND status = 'pending' AND next_attempt_at <= ?`,
      [now + this.leaseMs, token, now, ...ids, now],
    );
    if (!claimed.affected) return [];
    const rows = await queryRows(
      this.ds,
      "SELECT d.id, d.endpoint_id, d.attempts, d.retry_until, d.created_at, d.event_id, w.url, w.secret, w.previous_secret, w.previous_secret_expires_at, w.status AS endpoint_status, " +
        "e.id AS e_id, e.account_id AS e_account_id, e.mode AS e_mode, e.type AS e_type, e.actor_type AS e_actor_type, e.actor_id AS e_actor_id, e.data AS e_data, e.created_at AS e_created_at " +
        "FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.endpoint_id LEFT JOIN events e ON e.id = d.event_id " +
        `WHERE d.id IN (${list}) AND d.lease_token = ?`,
      [...ids, token],
    );
    const payloadOf = webhookBodies();
    return rows.map((r) => ({
      id: r.id,
      endpointId: r.endpoint_id,
      leaseToken: token,
      attempts: Number(r.attempts),
      retryUntil: r.retry_until === null ? null : Number(r.retry_until),
      createdAt: Number(r.created_at),
      url: r.url,
      secrets: signingSecrets(r),
      endpointEnabled: r.endpoint_status === "enabled",
      eventId: r.event_id,
      payload:
        r.e_id === null
          ? null
          : payloadOf({
              seq: 0,
              id: r.e_id,
              account_id: r.e_account_id,
              mode: r.e_mode,
              type: r.e_type,
              actor_type: r.e_actor_type,
              actor_id: r.e_actor_id,
              data: r.e_data,
              created_at: Number(r.e_created_at),
            }),
    }));
  }

  private succeededBatch: { d: ClaimedDelivery; status: number; settle: (err?: unknown) => void }[] = [];

  /**
   * The attempt got a 2xx. Successes that end together are recorded together, one UPDATE per
   * status code: a write per delivery cost the API as much as the sending.
   */
  succeeded(d: ClaimedDelivery, status: number): Promise<void> {
    return new Promise((resolve, reject) => {
      if (this.succeededBatch.push({ d, status, settle: (err) => (err ? reject(err) : resolve()) }) === 1) setImmediate(() => void this.recordSucceeded());
    });
  }

  private async recordSucceeded(): Promise<void> {
    const batch = this.succeededBatch;
    this.succeededBatch = [];
    for (const status of new Set(batch.map((b) => b.status))) {
      const group = batch.filter((b) => b.status === status);
      const list = placeholders(group);
      try {
        await runSql(
          this.ds,
          `UPDATE webhook_deliveries SET status = 'succeeded', next_attempt_at = NULL, lease_token = NULL, last_response_status = ?, last_error = NULL, updated_at = ? WHERE id IN (${list}) AND lease_token IN (${list})`,
          [status, Date.now(), ...group.map((b) => b.d.id), ...group.map((b) => b.d.leaseToken)],
        );
        for (const b of group) b.settle();
      } catch (err) {
        for (const b of group) b.settle(err);
      }
    }
  }

  /**
   * The attempt failed: retried after a backoff while inside the retry window, else final. An
   * automatic schedule that ends in failure disables the endpoint (with its event); a manual
   * retry's one attempt only fails its delivery. `final` fails it at once (nothing to send).
   */
  async failed(d: ClaimedDelivery, status: number | null, error: string, final = false): Promise<void> {
    const now = Date.now();
    const retryUntil = d.retryUntil ?? d.createdAt + this.config.retryWindowMs;
    const next = now + backoffMs(d.attempts, this.config.retryBaseMs, MAX_RETRY_DELAY_MS);
    const outcome = { status, error: error.slice(0, 500), now };
    if (!final && next <= retryUntil) {
      await runSql(
        this.ds,
        "UPDATE webhook_deliveries SET next_attempt_at = ?, lease_token = NULL, last_response_status = ?, last_error = ?, updated_at = ? WHERE id = ? AND lease_token = ?",
        [next, outcome.status, outcome.error, now, d.id, d.leaseToken],
      );
      return;
    }
    const fail: Statement = {
      sql: "UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL, lease_token = NULL, last_response_status = ?, last_error = ?, updated_at = ? WHERE id = ? AND lease_token = ?",
      params: [outcome.status, outcome.error, now, d.id, d.leaseToken],
      expect: 1,
    };
    if (final || d.retryUntil !== null || !d.endpointEnabled) {
      await runSql(this.ds, fail.sql, fail.params);
      return;
    }
    const disabled = await this.disableStatements(d.endpointId, now);
    if (!disabled || !(await commitWithEvents(this.ds, [fail, ...disabled.change], [disabled.event], "change_first", [lockEndpointsOf(disabled.event.accountId)])))
      await runSql(this.ds, fail.sql, fail.params);
  }

  /**
   * Disabling an endpoint whose retries ran out: its status (if still enabled), its other pending
   * deliveries failed, and the event that says so. Null when the endpoint is gone.
   */
  private async disableStatements(endpointId: string, now: number) {
    const endpoint = await fastRepository(this.ds, WebhookEndpointEntity).findOneBy({ id: endpointId });
    if (!endpoint) return null;
    const change: Statement[] = [
      { sql: "UPDATE webhook_endpoints SET status = 'disabled', updated_at = ? WHERE id = ? AND status = 'enabled'", params: [now, endpointId], expect: 1 },
      failPendingStatement(endpointId, "not sent: the endpoint was disabled after a delivery failed for the whole retry schedule", now),
    ];
    const event = { accountId: endpoint.account_id, mode: endpoint.mode, type: "webhook_endpoint.disabled" as const, object: endpointView({ ...endpoint, status: "disabled" }), actor: SYSTEM };
    return { change, event };
  }

  /** Gives claimed attempts back unmade (the instance is stopping, or is busy): due again at once, on any instance. */
  async release(claimed: ClaimedDelivery[]): Promise<void> {
    if (claimed.length === 0) return;
    const list = placeholders(claimed);
    await runSql(
      this.ds,
      `UPDATE webhook_deliveries SET next_attempt_at = ?, lease_token = NULL, attempts = attempts - 1 WHERE id IN (${list}) AND lease_token IN (${list})`,
      [Date.now(), ...claimed.map((d) => d.id), ...claimed.map((d) => d.leaseToken)],
    );
  }

  /**
   * Deletes deliveries older than the events they carry (30 days), oldest first in batches, in
   * insertion order (the primary key: no index of its own to keep up on every event).
   */
  async purgeExpired(): Promise<number> {
    const cutoff = Date.now() - DELIVERY_RETENTION_MS;
    let purged = 0;
    for (;;) {
      const first: { seq: number; created_at: number }[] = await queryRows(this.ds, `SELECT seq, created_at FROM webhook_deliveries ORDER BY seq LIMIT ${PURGE_BATCH}`, []);
      const old = first.filter((d) => Number(d.created_at) < cutoff);
      if (old.length === 0) return purged;
      const seqs = old.map((d) => Number(d.seq));
      purged += (await runSql(this.ds, `DELETE FROM webhook_deliveries WHERE seq IN (${placeholders(seqs)})`, seqs)).affected ?? 0;
      if (old.length < PURGE_BATCH) return purged;
    }
  }
}
