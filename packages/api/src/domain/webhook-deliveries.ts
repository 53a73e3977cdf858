import type { DataSource } from "typeorm";
import { databaseKind } from "../db/datasource.js";
import { WebhookEndpointEntity, type EventRecord } from "../db/entities.js";
import { fastRepository, padded, paddedLength, placeholders, queryRows, runAtomically, runSql, type Statement } from "../db/fast.js";
import { backoffMs } from "./backoff.js";
import type { Deps } from "./deps.js";
import { addEventFanOut, commitWithEvents, eventJson, SYSTEM, type EventStatement } from "./events.js";
import { randomToken } from "./ids.js";
import { endpointView, previousSecretUntil } from "./webhook-views.js";

/** Retries are at most this far apart (the doubling stops there). */
const MAX_RETRY_DELAY_MS = 6 * 3600 * 1000;
/** Finished deliveries are kept as long as events, then purged in batches. */
const DELIVERY_RETENTION_MS = 30 * 24 * 3600 * 1000;
const PURGE_BATCH = 1000;
/**
 * What an event's deliveries' ids start with: `whd_` and the 16 characters of the event's id after
 * `evt_` (its millisecond and 8 random characters); each ends with its endpoint id's last 8 (random:
 * its first ones are the millisecond it was made, see newId). One delivery per event and endpoint.
 */
const deliveryPrefix = (eventId: string) => `whd_${eventId.slice(4, 20)}`;
const PREFIX_LENGTH = 20;
/** Events whose deliveries are written (and read back) at once; the rest at the next poll. */
const FRESH_PER_READ = 500;
/** Endpoints looked at per claim; the next claim goes on after the last one (round robin). */
const ENDPOINTS_PER_CLAIM = 200;

/** Webhook bodies of a batch of deliveries: an event going to several endpoints is made JSON once. */
function webhookBodies(): (event: Omit<EventRecord, "seq">) => string {
  const made = new Map<string, string>();
  return (event) => {
    let body = made.get(event.id);
    if (body === undefined) made.set(event.id, (body = eventJson(event)));
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

/**
 * The fan-out of the outbox, its first step: with every event, in its transaction, one row of
 * `webhook_fan_outs` naming the enabled endpoints of the event's account and mode that take its
 * type, as they are then (none, no row: an account without endpoints costs one empty index range,
 * and endpoints made or deleted on any instance count at once). The delivery rows are written
 * from it moments later by a worker, many events per transaction (WebhookDeliveryQueue.expand):
 * three delivery rows per event written in the event's own transaction were most of what
 * webhooks cost the API's creates on SQLite.
 *
 * On an instance whose worker runs, the row is leased to that worker, which is told of the event
 * once it commits and writes its deliveries already claimed for itself. If the instance dies
 * first, the lease ends and any instance writes them (at least once).
 */
function fanOutStatement(ds: DataSource, events: Omit<EventRecord, "seq">[]): EventStatement {
  const here = sendingHere.get(ds);
  const select =
    "SELECT ?, GROUP_CONCAT(id), ?, ? FROM webhook_endpoints " +
    `WHERE account_id = ? AND mode = ? AND status = 'enabled' AND (events = '["*"]' OR INSTR(events, ?) > 0) HAVING COUNT(*) > 0`;
  return {
    // One statement for the events of one transaction, a SELECT per event: on MariaDB every statement is a round trip.
    sql: `INSERT INTO webhook_fan_outs (event_id, endpoint_ids, lease_token, lease_until) ${events.map(() => select).join(" UNION ALL ")}`,
    params: events.flatMap((e) => [e.id, here?.token ?? null, here ? e.created_at + here.leaseMs : 0, e.account_id, e.mode, JSON.stringify(e.type)]),
    // Which of the events got a row is not told; one without reads nothing when its deliveries are written.
    afterCommit: here && ((result) => result.affected && here.committed(events)),
  };
}
addEventFanOut((ds, events) => [fanOutStatement(ds, events)]);

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
  /** The attempt must start by then (its lease, less the timeout and a margin), else be given back. */
  startBy: number;
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
  /** It waited on this instance for a slot after its claim (its endpoint is read again before sending). */
  waited?: boolean;
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
  /** Events committed here whose fan-outs are leased to this instance, their deliveries not yet written. */
  private fresh: Omit<EventRecord, "seq">[] = [];
  private onFresh: ((dueNow: boolean) => void) | undefined;
  /** The endpoints whose attempts in flight here are at their limit (the worker's). */
  busyHere: () => string[] = () => [];
  /** The worker's token: the fan-outs of events committed on this instance are leased to it. */
  readonly token = randomToken(24);

  /** A claim outlives any attempt (the timeout) by a margin; after it, the delivery is due again. */
  get leaseMs() {
    return this.config.timeoutMs + 60_000;
  }

  /** When an attempt claimed now must have started for its outcome to land inside its lease. */
  private startByFor(now: number): number {
    return now + this.leaseMs - this.config.timeoutMs - 10_000;
  }

  /**
   * From now on, events committed on this instance have their fan-outs leased to it, and
   * `listener` is called after each such commit (takeFresh writes and claims their deliveries), or
   * with `dueNow` after a delivery was made due here (wakeWorkerHere). Returns the end.
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

  /** Told by the fan-out once events whose fan-outs are leased to this instance have committed (one transaction's). */
  committed(events: Omit<EventRecord, "seq">[]): void {
    this.fresh.push(...events);
    // Committed once the worker had stopped: its deliveries are written due at once, for any
    // instance. Should that fail, the lease ends and any instance writes them.
    if (this.onFresh) this.onFresh(false);
    else void this.giveBackFresh().catch(() => undefined);
  }

  get hasFresh(): boolean {
    return this.fresh.length > 0;
  }

  /**
   * Writes the delivery rows of these events' fan-outs and deletes the fan-outs, in one
   * transaction: this instance's while their lease lasts, or (`adopt`) those whose lease has ended,
   * first leased to this call so that one instance writes each event's rows. A delivery is written
   * for each endpoint the fan-out names that still exists (disabled since: its attempt fails it).
   * With `claimed`, the rows are written claimed by this instance under that token (attempt 1,
   * leased), but for the `busy` endpoints (at their limit here: those rows are due, for a claim
   * when a slot frees); otherwise all are due. Returns how many were written.
   */
  private async expand(ids: string[], o: { claimed?: { leaseToken: string; busy: string[] }; adopt?: boolean } = {}): Promise<number> {
    const now = Date.now();
    const token = o.adopt ? randomToken(24) : this.token;
    // Whose fan-outs are written: this call's once adopted, else this instance's while their lease lasts.
    const held = (alias: string) => (o.adopt ? `${alias}lease_token = ?` : `${alias}lease_token = ? AND ${alias}lease_until > ?`);
    const heldParams = o.adopt ? [token] : [token, now];
    const mysql = databaseKind(this.ds) === "mysql";
    const id = mysql ? "CONCAT('whd_', SUBSTRING(e.id, 5, 16), RIGHT(w.id, 8))" : "('whd_' || substr(e.id, 5, 16) || substr(w.id, -8))";
    const named = mysql ? "FIND_IN_SET(w.id, f.endpoint_ids) > 0" : "INSTR(',' || f.endpoint_ids || ',', ',' || w.id || ',') > 0";
    const busy = padded(o.claimed?.busy ?? []);
    const eventIds = padded(ids);
    // 1 where the row is written claimed.
    const mine = !o.claimed ? "0" : busy.length ? `(w.id NOT IN (${placeholders(busy)}))` : "1";
    const list = placeholders(eventIds);
    const steps: Statement[] = [
      {
        sql:
          "INSERT INTO webhook_deliveries (id, endpoint_id, account_id, mode, event_id, event_type, status, attempts, next_attempt_at, lease_token, created_at, updated_at) " +
          `SELECT ${id}, w.id, w.account_id, w.mode, e.id, e.type, 'pending', ${mine}, ? + ${mine} * ?, CASE WHEN ${mine} = 1 THEN ? END, e.created_at, ? ` +
          `FROM webhook_fan_outs f JOIN events e ON e.id = f.event_id JOIN webhook_endpoints w ON w.account_id = e.account_id AND w.mode = e.mode AND ${named} ` +
          `WHERE f.event_id IN (${list}) AND ${held("f.")}`,
        params: [...busy, now, ...busy, this.leaseMs, ...busy, o.claimed?.leaseToken ?? null, now, ...eventIds, ...heldParams],
      },
      { sql: `DELETE FROM webhook_fan_outs WHERE event_id IN (${list}) AND ${held("")}`, params: [...eventIds, ...heldParams] },
    ];
    if (o.adopt)
      steps.unshift({
        sql: `UPDATE webhook_fan_outs SET lease_token = ?, lease_until = ? WHERE event_id IN (${list}) AND lease_until <= ?`,
        params: [token, now + this.leaseMs, ...eventIds, now],
      });
    const done = await runAtomically(this.ds, steps);
    return done?.[o.adopt ? 1 : 0]!.affected ?? 0;
  }

  /** Writes the deliveries of the events committed here since the last call, all due, for any instance's claim (the worker stops). */
  async giveBackFresh(): Promise<void> {
    while (this.fresh.length > 0) await this.expand(this.fresh.splice(0, FRESH_PER_READ).map((e) => e.id));
  }

  /**
   * Writes, due, the deliveries of fan-outs that no live instance holds: their instance died, or
   * runs no worker. A small table (its rows live for milliseconds), read whole.
   */
  async adoptFanOuts(): Promise<number> {
    const ids = (await queryRows(this.ds, `SELECT event_id FROM webhook_fan_outs WHERE lease_until <= ? LIMIT ${FRESH_PER_READ}`, [Date.now()])).map(
      (r: { event_id: string }) => r.event_id,
    );
    return ids.length ? this.expand(ids, { adopt: true }) : 0;
  }

  /**
   * The deliveries of events committed here since the last call, written claimed for this instance:
   * one transaction for all of them, one read of their rows (ranges of the id index) and one of
   * their endpoints; the events are in memory. A row whose endpoint was deleted meanwhile is left
   * to its lease.
   */
  async takeFresh(): Promise<ClaimedDelivery[]> {
    const events = this.fresh.splice(0, FRESH_PER_READ);
    if (events.length === 0) return [];
    const leaseToken = randomToken(24);
    const startBy = this.startByFor(Date.now());
    if ((await this.expand(events.map((e) => e.id), { claimed: { leaseToken, busy: this.busyHere() } })) === 0) return [];
    const fresh = new Map(events.map((e) => [deliveryPrefix(e.id), e]));
    const prefixes = padded([...fresh.keys()]);
    // Two reads, not a join: with a join the planner may read the deliveries through the endpoint
    // index (every delivery of each endpoint) rather than by these ranges of the id index.
    const rows: { id: string; endpoint_id: string; lease_token: string | null; created_at: number }[] = await queryRows(
      this.ds,
      `SELECT id, endpoint_id, lease_token, created_at FROM webhook_deliveries WHERE ${prefixes.map(() => "(id >= ? AND id < ?)").join(" OR ")}`,
      prefixes.flatMap((prefix) => [prefix, `${prefix}~`]),
    );
    if (rows.length === 0) return [];
    const endpointIds = padded([...new Set(rows.map((r) => r.endpoint_id))]);
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
      const event = fresh.get(r.id.slice(0, PREFIX_LENGTH));
      const w = endpoints.get(r.endpoint_id);
      if (!event || !w || r.lease_token !== leaseToken) return [];
      const payload = payloadOf(event);
      return [{ id: r.id, endpointId: r.endpoint_id, leaseToken, startBy, attempts: 1, retryUntil: null, createdAt: Number(r.created_at), url: w.url, secrets: signingSecrets(w), endpointEnabled: w.status === "enabled", eventId: event.id, payload }];
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
    // Padded with heads that read nothing (no endpoint, LIMIT 0), as lists are.
    const wanted = [...room, ...Array<[string, number]>(paddedLength(room.size) - room.size).fill(["", 0])];
    const heads = wanted.map(
      (_, i) => `SELECT * FROM (SELECT id, next_attempt_at FROM webhook_deliveries WHERE status = 'pending' AND endpoint_id = ? AND next_attempt_at <= ? ORDER BY next_attempt_at LIMIT ?) h${i}`,
    );
    const due: { id: string; next_attempt_at: number }[] = await queryRows(this.ds, heads.join(" UNION ALL "), wanted.flatMap(([id, n]) => [id, now, n]));
    const ids = padded(
      due
        .sort((a, b) => Number(a.next_attempt_at) - Number(b.next_attempt_at))
        .slice(0, limit)
        .map((d) => d.id),
    );
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
      startBy: this.startByFor(now),
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

  /** A claimed attempt with its endpoint as it is now; null when the endpoint was deleted. */
  async current(d: ClaimedDelivery): Promise<ClaimedDelivery | null> {
    const [w]: (SigningEndpoint & { url: string; status: string })[] = await queryRows(
      this.ds,
      "SELECT url, secret, previous_secret, previous_secret_expires_at, status FROM webhook_endpoints WHERE id = ?",
      [d.endpointId],
    );
    return w ? { ...d, url: w.url, secrets: signingSecrets(w), endpointEnabled: w.status === "enabled" } : null;
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
      const ids = padded(group.map((b) => b.d.id));
      const tokens = padded(group.map((b) => b.d.leaseToken));
      const list = placeholders(ids);
      try {
        await runSql(
          this.ds,
          `UPDATE webhook_deliveries SET status = 'succeeded', next_attempt_at = NULL, lease_token = NULL, last_response_status = ?, last_error = NULL, updated_at = ? WHERE id IN (${list}) AND lease_token IN (${list})`,
          [status, Date.now(), ...ids, ...tokens],
        );
        for (const b of group) b.settle();
      } catch (err) {
        for (const b of group) b.settle(err);
      }
    }
  }

  /**
   * The attempt failed: retried after a backoff while inside the retry window and its endpoint is
   * enabled, else final. An
   * automatic schedule that ends in failure disables the endpoint (with its event), unless the
   * endpoint took later deliveries (takesOthers); a manual retry's one attempt only fails its delivery. `final` fails it at once (nothing to send).
   */
  async failed(d: ClaimedDelivery, status: number | null, error: string, final = false): Promise<void> {
    const now = Date.now();
    const retryUntil = d.retryUntil ?? d.createdAt + this.config.retryWindowMs;
    // The last retry is at the window's end, whatever the backoff (with its jitter) would say.
    const next = Math.min(now + backoffMs(d.attempts, this.config.retryBaseMs, MAX_RETRY_DELAY_MS), retryUntil);
    const outcome = { status, error: error.slice(0, 500), now };
    if (!final && now < retryUntil) {
      // Retried only while its endpoint is enabled: one disabled while this attempt was in flight
      // failed its other pending deliveries (failPendingStatement), and this one fails with them.
      const retried = await runSql(
        this.ds,
        "UPDATE webhook_deliveries SET next_attempt_at = ?, lease_token = NULL, last_response_status = ?, last_error = ?, updated_at = ? " +
          "WHERE id = ? AND lease_token = ? AND endpoint_id IN (SELECT id FROM webhook_endpoints WHERE id = ? AND status = 'enabled')",
        [next, outcome.status, outcome.error, now, d.id, d.leaseToken, d.endpointId],
      );
      if (retried.affected) return;
      final = true;
    }
    const fail: Statement = {
      sql: "UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL, lease_token = NULL, last_response_status = ?, last_error = ?, updated_at = ? WHERE id = ? AND lease_token = ?",
      params: [outcome.status, outcome.error, now, d.id, d.leaseToken],
      expect: 1,
    };
    if (final || d.retryUntil !== null || !d.endpointEnabled || (await this.takesOthers(d))) {
      await runSql(this.ds, fail.sql, fail.params);
      return;
    }
    const disabled = await this.disableStatements(d.endpointId, now);
    if (!disabled || !(await commitWithEvents(this.ds, [fail, ...disabled.change], [disabled.event], "change_first", [lockEndpointsOf(disabled.event.accountId)])))
      await runSql(this.ds, fail.sql, fail.params);
  }

  /**
   * Whether the endpoint took any of the newest 50 deliveries attempted since this one: then it is
   * alive, and the one event it keeps refusing (a payload its code cannot take) fails alone rather
   * than stopping every other. Fresh ones, not attempted yet, say nothing either way.
   */
  private async takesOthers(d: ClaimedDelivery): Promise<boolean> {
    const rows = await queryRows(
      this.ds,
      "SELECT status FROM webhook_deliveries WHERE endpoint_id = ? AND seq > (SELECT seq FROM webhook_deliveries WHERE id = ?) AND attempts > 0 ORDER BY seq DESC LIMIT 50",
      [d.endpointId, d.id],
    );
    return rows.some((r) => r.status === "succeeded");
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
    const disabled = { ...endpoint, status: "disabled" as const, updated_at: now };
    const event = { accountId: endpoint.account_id, mode: endpoint.mode, type: "webhook_endpoint.disabled" as const, object: endpointView(disabled), actor: SYSTEM };
    return { change, event };
  }

  /** Gives claimed attempts back unmade (the instance is stopping, or is busy): due again at once, on any instance. */
  async release(claimed: ClaimedDelivery[]): Promise<void> {
    if (claimed.length === 0) return;
    const ids = padded(claimed.map((d) => d.id));
    const list = placeholders(ids);
    await runSql(
      this.ds,
      `UPDATE webhook_deliveries SET next_attempt_at = ?, lease_token = NULL, attempts = attempts - 1 WHERE id IN (${list}) AND lease_token IN (${list})`,
      [Date.now(), ...ids, ...padded(claimed.map((d) => d.leaseToken))],
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
      const seqs = padded(old.map((d) => Number(d.seq)));
      purged += (await runSql(this.ds, `DELETE FROM webhook_deliveries WHERE seq IN (${placeholders(seqs)})`, seqs)).affected ?? 0;
      if (old.length < PURGE_BATCH) return purged;
    }
  }
}
