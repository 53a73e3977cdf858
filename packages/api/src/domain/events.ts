import type { DataSource } from "typeorm";
import { EVENT_TYPES, type EventType } from "@cardctl/contract";
import { EventEntity, type ActorType, type Card, type EventRecord, type Mode } from "../db/entities.js";
import { fastRepository, padded, placeholders, queryRows, runAtomically, runSql, type SqlResult, type Statement } from "../db/fast.js";
import type { Deps, Principal } from "./deps.js";
import { forbidden, notFound } from "./errors.js";
import { isoTime, newId } from "./ids.js";
import { pageOf, type Page, type PageQuery } from "./paging.js";
import { EventFeed } from "./event-feed.js";
import { holdView } from "./views.js";

/** Who caused a state change; `id` names the API key (key_…) or the owner (own_…). */
export type Actor = { type: Extract<ActorType, "api_key" | "owner">; id: string } | { type: Extract<ActorType, "processor" | "system"> };

/** Who acts in a request: the signed-in owner (a dashboard session), else the API key. */
export const actorOf = (p: Principal): Actor => (p.ownerId ? { type: "owner", id: p.ownerId } : { type: "api_key", id: p.keyId });
export const PROCESSOR: Actor = { type: "processor" };
export const SYSTEM: Actor = { type: "system" };

/** An event to record: what changed (`object`, the resource as the API shows it), where, and who did it. */
export interface NewEvent {
  accountId: string;
  mode: Mode;
  type: EventType;
  object: unknown;
  actor: Actor;
}

/** The end of a card's hold, `capturedCents` of it captured (0: released whole). */
export const holdEvent = (card: Card, capturedCents: number, actor: Actor = PROCESSOR): NewEvent => ({
  accountId: card.account_id,
  mode: card.mode,
  type: capturedCents > 0 ? "hold.captured" : "hold.released",
  object: holdView(card, capturedCents),
  actor,
});

/**
 * A statement of an event's transaction; `afterCommit` is told its result once the transaction
 * committed (by commitWithEvents, which every event is written through).
 */
export interface EventStatement extends Statement {
  afterCommit?: (result: SqlResult) => void;
}

/**
 * Statements to commit with every event, beside its insert, in the same transaction (the hook of
 * outgoing webhooks: their delivery rows). Each receives the event rows of one transaction as
 * inserted.
 */
export type EventFanOut = (ds: DataSource, events: Omit<EventRecord, "seq">[]) => EventStatement[];
const fanOuts: EventFanOut[] = [];

/** Registers statements to run with every event recorded from now on (see EventFanOut). */
export function addEventFanOut(fanOut: EventFanOut): void {
  fanOuts.push(fanOut);
}

/**
 * The outbox (DESIGN 3.7): the statements that record events, to run in the state change's own
 * transaction (commitWithEvents, after the conditional update whose `expect` guards the transition),
 * so an event exists exactly when its change committed. One insert of all the events, in their
 * order, plus any fan-out: a statement each rather than one per event (on MariaDB each is a round
 * trip of the transaction).
 */
export function eventStatements(ds: DataSource, events: NewEvent[]): EventStatement[] {
  if (events.length === 0) return [];
  const created = Date.now();
  const rows = events.map(
    (e): Omit<EventRecord, "seq"> => ({
      id: newId("evt"),
      account_id: e.accountId,
      mode: e.mode,
      type: e.type,
      actor_type: e.actor.type,
      actor_id: "id" in e.actor ? e.actor.id : null,
      data: JSON.stringify(e.object),
      created_at: created,
    }),
  );
  const insert: EventStatement = {
    ...fastRepository(ds, EventEntity).insertStatement(rows),
    afterCommit: () => rows.forEach((row) => wakeWatchers(ds, row.account_id, row.mode)),
  };
  return [insert, ...fanOuts.flatMap((f) => f(ds, rows))];
}

/** Who waits for the events committed on this instance, per database, by account and mode (event streams, EventService.watch). */
const committedHere = new WeakMap<DataSource, Map<string, Set<() => void>>>();
const scopeKey = (accountId: string, mode: Mode) => `${accountId}:${mode}`;
const wakeWatchers = (ds: DataSource, accountId: string, mode: Mode) => committedHere.get(ds)?.get(scopeKey(accountId, mode))?.forEach((wake) => wake());

/**
 * Runs a state change and its events as one transaction (the change's statements first): the
 * statements' results, or null when a conditional statement of the change missed (nothing written).
 * `order: "events_first"` writes the events before the change, so their fan-out sees the webhook
 * endpoints as they were: an endpoint being made or enabled again is not sent its own event.
 * `lead` runs before both: a lock taken first, so that changes that would deadlock queue instead
 * (see lockEndpointsOf).
 */
export function commitWithEvents(
  ds: DataSource,
  change: EventStatement[],
  events: NewEvent[],
  order: "change_first" | "events_first" = "change_first",
  lead: EventStatement[] = [],
): Promise<SqlResult[] | null> {
  const recorded = eventStatements(ds, events);
  const steps = [...lead, ...(order === "change_first" ? [...change, ...recorded] : [...recorded, ...change])];
  return runAtomically(ds, steps).then((results) => {
    if (results) steps.forEach((step, i) => step.afterCommit?.(results[i]!));
    return results;
  });
}

/** An event as the API shows it, but for its data. */
const eventHead = (e: Omit<EventRecord, "seq">) => ({
  id: e.id,
  object: "event" as const,
  type: e.type as EventType,
  created_at: isoTime(e.created_at),
  mode: e.mode,
  actor: { type: e.actor_type, id: e.actor_id },
});

/** An event as the API shows it (GET /v1/events). */
export const eventView = (e: Omit<EventRecord, "seq">) => ({ ...eventHead(e), data: { object: JSON.parse(e.data) as Record<string, unknown> } });

/**
 * An event's JSON, as `JSON.stringify(eventView(e))` writes it, with the stored data (written by
 * JSON.stringify) spliced in as it is rather than parsed and written again: webhook bodies and the
 * live stream.
 */
export const eventJson = (e: Omit<EventRecord, "seq">): string => `${JSON.stringify(eventHead(e)).slice(0, -1)},"data":{"object":${e.data}}}`;

export type EventView = ReturnType<typeof eventView>;

/** Events are kept this long, then purged by the maintenance pass. */
export const EVENT_RETENTION_MS = 30 * 24 * 3600 * 1000;
const PURGE_BATCH = 1000;
/**
 * One batch of the purge, oldest first, read from the created_at index, never the newest event: on
 * SQLite a new event takes the highest seq + 1 (no AUTOINCREMENT, migration 1734500000000), and
 * readers of the outbox rely on seq never going back.
 */
const PURGE_SELECT = `SELECT seq FROM events WHERE created_at < ? AND seq < (SELECT MAX(seq) FROM events) ORDER BY created_at LIMIT ${PURGE_BATCH}`;

/**
 * The events an agent key reads: those of what it may read itself (cards, their authorizations,
 * money and approvals; the policy). The account's set-up, its API keys and its webhook endpoints
 * are full keys' business (DESIGN 3.2, 3.7), and their events carry cardholder details, key names
 * and receiver URLs.
 */
const AGENT_EVENT_TYPES: ReadonlySet<EventType> = new Set(
  EVENT_TYPES.filter((type) => ["card.", "approval.", "authorization.", "transaction.", "hold.", "payment.", "processor.", "policy."].some((of) => type.startsWith(of))),
);

const readableBy = (p: Principal, type: string) => p.role !== "agent" || AGENT_EVENT_TYPES.has(type as EventType);

/** Refuses a filter on event types the key may not read (rather than answering an empty list). */
function refuseUnreadable(p: Principal, types: readonly EventType[]): void {
  const unreadable = types.filter((type) => !readableBy(p, type));
  if (unreadable.length > 0) throw forbidden(`This API key has the 'agent' role; ${unreadable.join(", ")} events need a 'full' key.`);
}

/** Reading the outbox: lists and single events, scoped to the key's account, mode and role; and its purge. */
export class EventService {
  constructor(private readonly deps: Deps) {}

  private get repo() {
    return fastRepository(this.deps.ds, EventEntity);
  }

  list(p: Principal, filters: { type?: EventType }, page: PageQuery): Promise<Page<EventRecord>> {
    const scope = { account_id: p.accountId, mode: p.mode };
    if (filters.type === undefined) {
      const keep = p.role === "agent" ? (e: EventRecord) => readableBy(p, e.type) : undefined;
      return pageOf(this.repo, scope, {}, page, keep, { index: "ix_events_list" });
    }
    refuseUnreadable(p, [filters.type]);
    return pageOf(this.repo, scope, { type: filters.type }, page, undefined, { index: "ix_events_type" });
  }

  /** A live reader of the key's account and mode (GET /v1/events/stream), see EventFeed. */
  feed(p: Principal, opts: { lastEventId?: string; types?: EventType[] }): Promise<EventFeed> {
    refuseUnreadable(p, opts.types ?? []);
    const types = opts.types?.length || p.role !== "agent" ? opts.types : [...AGENT_EVENT_TYPES];
    return EventFeed.open(this.deps, p, { ...opts, types });
  }

  /**
   * Calls `wake` after each event of the key's account and mode commits on this instance, so a
   * stream reads it at once rather than at its next poll (events of other instances still come by
   * polling). Returns the end of the watch.
   */
  watch(p: Principal, wake: () => void): () => void {
    const byScope = committedHere.get(this.deps.ds) ?? new Map<string, Set<() => void>>();
    committedHere.set(this.deps.ds, byScope);
    const key = scopeKey(p.accountId, p.mode);
    const waiting = byScope.get(key) ?? new Set();
    byScope.set(key, waiting.add(wake));
    return () => {
      waiting.delete(wake);
      if (waiting.size === 0 && byScope.get(key) === waiting) byScope.delete(key);
    };
  }

  async find(p: Principal, id: string): Promise<EventRecord> {
    const event = await this.repo.findOneBy({ id, account_id: p.accountId, mode: p.mode });
    if (!event || !readableBy(p, event.type)) throw notFound("event");
    return event;
  }

  /**
   * Deletes events older than EVENT_RETENTION_MS but the newest event, oldest first in batches
   * (short statements that never lock the table for long); any instance may run it at once with
   * the others.
   */
  async purgeExpired(): Promise<number> {
    const cutoff = Date.now() - EVENT_RETENTION_MS;
    let purged = 0;
    for (;;) {
      const old: { seq: number }[] = await queryRows(this.deps.ds, PURGE_SELECT, [cutoff]);
      if (old.length === 0) return purged;
      const seqs = padded(old.map((e) => Number(e.seq)));
      purged += (await runSql(this.deps.ds, `DELETE FROM events WHERE seq IN (${placeholders(seqs)})`, seqs)).affected ?? 0;
      if (old.length < PURGE_BATCH) return purged;
    }
  }
}
