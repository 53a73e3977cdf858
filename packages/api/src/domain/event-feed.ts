import { In } from "typeorm";
import type { EventType } from "@cardctl/contract";
import { EventEntity, type EventRecord } from "../db/entities.js";
import { fastRepository, queryRows } from "../db/fast.js";
import type { Deps, Principal } from "./deps.js";
import { EVENT_RETENTION_MS } from "./events.js";
import { idTime } from "./ids.js";
import { validationError } from "./validation.js";

/**
 * How long after a seq was seen an event below it may still appear. MySQL/MariaDB hand out
 * auto-increment values at insert and rows become visible at commit, so seq 8 can show up after
 * seq 9 was read; a transaction that writes an event lasts milliseconds, this is a wide margin.
 */
const SETTLE_MS = 30_000;
/** Seqs read per query; events fetched per call. */
const SCAN = 1000;
const BATCH = 200;
/** A cursor's range is recounted up to this many events (30 s of a busy account); a wider one (forged, or of a stalled stream) resumes after its event alone. */
const RESUME_MAX = 10_000;
/** An event missing from the outbox was purged if it was made this close to the retention or before (clocks of instances differ a little). */
const PURGE_MARGIN_MS = 3600_000;

const SCAN_SQL = `SELECT seq FROM events WHERE account_id = ? AND mode = ? AND seq > ? ORDER BY seq LIMIT ${SCAN}`;
const LAST_SQL = "SELECT seq, id FROM events WHERE account_id = ? AND mode = ? ORDER BY seq DESC LIMIT 1";
/** The newest event at or below a seq that is older than SETTLE_MS: nothing below it can still commit. */
const SETTLED_SQL = "SELECT seq, id FROM events WHERE account_id = ? AND mode = ? AND seq <= ? AND created_at < ? ORDER BY seq DESC LIMIT 1";

/** An event handed out, with the feed's cursor just after it (the SSE id a client resumes from). */
export interface FedEvent {
  event: EventRecord;
  cursor: string;
}

/** A seq of the account's events and that event's id (cursors name events by id, never by seq). */
interface Mark {
  seq: number;
  id: string;
}

/**
 * A cursor: the event just handed out, the feed's floor and the highest event handed out (by id;
 * "-" for the floor of an account that had no events), and how many of the account's events
 * between the two had been handed out. Seqs are global, so they stay out of what clients see.
 */
const cursorOf = (eventId: string, floor: Mark | null, max: Mark, handed: number) => `${eventId}.${floor?.id ?? "-"}.${max.id}.${handed}`;
const CURSOR = /^(evt_[A-Za-z0-9]+)\.(evt_[A-Za-z0-9]+|-)\.(evt_[A-Za-z0-9]+)\.(\d{1,9})$/;
/** The cursor of a feed of an account (and mode) that had no event when it opened: every event comes after it. */
const BEFORE_ALL = "-.-.-.0";

/**
 * A live reader of one account's events in one mode, from the outbox (so events written by any
 * instance arrive): each `next()` returns the events committed since the last call, oldest first.
 * It reads by seq, and keeps re-scanning the seqs of the last SETTLE_MS (an index-only read) for
 * rows that committed out of order, remembering which it has handed out, so none is skipped or
 * repeated. Each event comes with a cursor that carries that memory across a reconnect.
 */
export class EventFeed {
  /**
   * The highest event handed out, by when it was: the floor moves up to each once SETTLE_MS old.
   * The last one is the highest handed out so far (the floor, once they have all settled).
   */
  private readonly marks: { at: number; mark: Mark }[] = [];

  constructor(
    private readonly deps: Deps,
    private readonly p: Principal,
    /** Every event at or below this was handed out, filtered out, or is taken as never coming (null: none yet). */
    private floor: Mark | null,
    /** Seqs above the floor already handed out (or filtered out); `highest` is the top one. */
    private readonly seen: Set<number>,
    highest: Mark | null,
    private readonly types: ReadonlySet<EventType> | null,
  ) {
    if (highest) this.marks.push({ at: Date.now(), mark: highest });
  }

  /**
   * A feed from now on, or resuming after `lastEventId` (the SSE `Last-Event-ID` of a client
   * reconnecting): a cursor of this feed, or an event's id, of this account and mode. From a
   * cursor, the account's events between its floor and its highest are counted again: as many as
   * it had handed out means none committed late there, and nothing is sent twice; another number
   * means one did (or the purge took the floor), and that range is sent again (the events' ids tell
   * repeats apart). An event the purge took (older than 30 days) resumes from the account's oldest
   * kept event: every one kept came after it. An id that names no event of this account and mode
   * is refused, rather than taken as "from now", which would skip what came after it unsaid.
   */
  static async open(deps: Deps, p: Principal, opts: { lastEventId?: string; types?: EventType[] }): Promise<EventFeed> {
    const types = opts.types?.length ? new Set(opts.types) : null;
    if (opts.lastEventId === BEFORE_ALL) return new EventFeed(deps, p, null, new Set(), null, types);
    const cursor = CURSOR.exec(opts.lastEventId ?? "");
    const ids = cursor ? [cursor[1]!, cursor[2]!, cursor[3]!].filter((id) => id !== "-") : opts.lastEventId ? [opts.lastEventId] : [];
    const found = ids.length
      ? new Map(
          (await fastRepository(deps.ds, EventEntity).find({ where: { id: In(ids), account_id: p.accountId, mode: p.mode }, select: { seq: true, id: true } })).map(
            (e) => [e.id, { seq: Number(e.seq), id: e.id }],
          ),
        )
      : new Map<string, Mark>();
    const lastId = cursor ? cursor[1]! : opts.lastEventId;
    const after = lastId === undefined ? undefined : found.get(lastId);
    if (cursor && after) {
      // A floor the purge took: counted from the account's first kept event, which does not match.
      const floor = found.get(cursor[2]!) ?? null;
      const max = found.get(cursor[3]!);
      if (max) {
        const between = await seqsAbove(deps, p, floor?.seq ?? 0, max.seq, RESUME_MAX + 1);
        if (between.length <= RESUME_MAX) {
          const same = (floor !== null || cursor[2] === "-") && between.length === Number(cursor[4]);
          return new EventFeed(deps, p, floor, new Set(same ? between : []), same ? max : null, types);
        }
      }
    }
    if (after) return EventFeed.after(deps, p, after, types);
    if (lastId !== undefined) {
      const made = idTime(lastId);
      if (made === null || made > Date.now() - EVENT_RETENTION_MS + PURGE_MARGIN_MS)
        throw validationError([{ path: "Last-Event-ID", message: `Last-Event-ID ${lastId} names no event of this account in ${p.mode} mode` }]);
      return new EventFeed(deps, p, null, new Set(), null, types);
    }
    const [last] = await queryRows(deps.ds, LAST_SQL, [p.accountId, p.mode]);
    return EventFeed.after(deps, p, last ? { seq: Number(last.seq), id: last.id as string } : null, types);
  }

  /**
   * A feed of what comes after `top`: every event visible up to it counts as handed out, but one
   * below it still to commit (MySQL: its seq was given before `top`'s commit) is sent when it does.
   * The floor is the newest settled event (older than SETTLE_MS) at or below `top`, and the seqs
   * between the two are seen; too many of them (a very busy account), the floor is `top`.
   */
  private static async after(deps: Deps, p: Principal, top: Mark | null, types: ReadonlySet<EventType> | null): Promise<EventFeed> {
    if (!top) return new EventFeed(deps, p, null, new Set(), null, types);
    const [settled] = await queryRows(deps.ds, SETTLED_SQL, [p.accountId, p.mode, top.seq, Date.now() - SETTLE_MS]);
    const floor: Mark | null = settled ? { seq: Number(settled.seq), id: settled.id as string } : null;
    if (floor?.seq === top.seq) return new EventFeed(deps, p, top, new Set(), null, types);
    const between = await seqsAbove(deps, p, floor?.seq ?? 0, top.seq, RESUME_MAX + 1);
    if (between.length > RESUME_MAX) return new EventFeed(deps, p, top, new Set(), null, types);
    return new EventFeed(deps, p, floor, new Set(between), top, types);
  }

  /**
   * Where the feed stands, as a cursor (the stream's opening message carries it): a client that
   * resumes from it before any event arrived misses none that came meanwhile.
   */
  position(): string {
    const max = this.marks.at(-1)?.mark ?? this.floor;
    return max ? cursorOf(max.id, this.floor, max, this.seen.size) : BEFORE_ALL;
  }

  /** Whether the last `next()` stopped at its batch's size: more may be waiting to be read now. */
  more = false;

  async next(): Promise<FedEvent[]> {
    const now = Date.now();
    while (this.marks.length > 0 && this.marks[0]!.at <= now - SETTLE_MS) {
      const { mark } = this.marks.shift()!;
      if (mark.seq > (this.floor?.seq ?? 0)) this.floor = mark;
    }
    for (const seq of this.seen) if (seq <= (this.floor?.seq ?? 0)) this.seen.delete(seq);

    const fresh = (await seqsAbove(this.deps, this.p, this.floor?.seq ?? 0, Infinity, BATCH, this.seen)).slice(0, BATCH);
    this.more = fresh.length === BATCH;
    if (fresh.length === 0) return [];
    const rows = await fastRepository(this.deps.ds, EventEntity).find({ where: { seq: In(fresh) }, order: { seq: "ASC" } });
    let max = this.marks.at(-1)?.mark ?? this.floor;
    const fed: FedEvent[] = [];
    for (const event of rows) {
      const seq = Number(event.seq);
      this.seen.add(seq);
      if (!max || seq > max.seq) max = { seq, id: event.id };
      if (!this.types || this.types.has(event.type as EventType)) fed.push({ event, cursor: cursorOf(event.id, this.floor, max, this.seen.size) });
    }
    if (max) this.marks.push({ at: now, mark: max });
    return fed;
  }
}

/** The account's seqs above `from` up to `to`, ascending, skipping `except`, at most `limit` of them. */
async function seqsAbove(deps: Deps, p: Principal, from: number, to: number, limit = Infinity, except?: ReadonlySet<number>): Promise<number[]> {
  const out: number[] = [];
  for (let after = from; out.length < limit; ) {
    const seqs = (await queryRows(deps.ds, SCAN_SQL, [p.accountId, p.mode, after])).map((r) => Number(r.seq));
    for (const seq of seqs) if (seq <= to && !except?.has(seq) && out.length < limit) out.push(seq);
    if (seqs.length < SCAN || seqs[seqs.length - 1]! >= to) break;
    after = seqs[seqs.length - 1]!;
  }
  return out;
}
