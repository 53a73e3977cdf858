import { In } from "typeorm";
import type { EventType } from "@cardctl/contract";
import { EventEntity, type EventRecord } from "../db/entities.js";
import { fastRepository, queryRows } from "../db/fast.js";
import type { Deps, Principal } from "./deps.js";

/**
 * How long after a seq was seen an event below it may still appear. MySQL/MariaDB hand out
 * auto-increment values at insert and rows become visible at commit, so seq 8 can show up after
 * seq 9 was read; a transaction that writes an event lasts milliseconds, this is a wide margin.
 */
const SETTLE_MS = 30_000;
/** Seqs read per query; events fetched per call. */
const SCAN = 1000;
const BATCH = 200;

const SCAN_SQL = `SELECT seq FROM events WHERE account_id = ? AND mode = ? AND seq > ? ORDER BY seq LIMIT ${SCAN}`;
const LAST_SQL = "SELECT MAX(seq) AS seq FROM events WHERE account_id = ? AND mode = ?";

/**
 * A live reader of one account's events in one mode, from the outbox (so events written by any
 * instance arrive): each `next()` returns the events committed since the last call, oldest first.
 * It reads by seq, and keeps re-scanning the seqs of the last SETTLE_MS (an index-only read) for
 * rows that committed out of order, remembering which it has handed out, so none is skipped or
 * repeated.
 */
export class EventFeed {
  /** Every event at or below this seq was handed out, filtered out, or is taken as never coming. */
  private floor: number;
  /** Seqs above the floor already handed out (or filtered out). */
  private readonly seen = new Set<number>();
  /** The highest seq seen, by when it was seen: the floor moves up to each once SETTLE_MS old. */
  private readonly marks: { at: number; seq: number }[] = [];

  constructor(
    private readonly deps: Deps,
    private readonly p: Principal,
    start: number,
    private readonly types: ReadonlySet<EventType> | null,
  ) {
    this.floor = start;
  }

  /**
   * A feed from now on, or from just after `lastEventId` (the SSE `Last-Event-ID` of a client
   * reconnecting), if it names an event of this account and mode that is still kept.
   */
  static async open(deps: Deps, p: Principal, opts: { lastEventId?: string; types?: EventType[] }): Promise<EventFeed> {
    const types = opts.types?.length ? new Set(opts.types) : null;
    const after = opts.lastEventId
      ? await fastRepository(deps.ds, EventEntity).findOneBy({ id: opts.lastEventId, account_id: p.accountId, mode: p.mode })
      : null;
    const start = after ? after.seq : Number((await queryRows(deps.ds, LAST_SQL, [p.accountId, p.mode]))[0]?.seq ?? 0);
    return new EventFeed(deps, p, start, types);
  }

  async next(): Promise<EventRecord[]> {
    const now = Date.now();
    while (this.marks.length > 0 && this.marks[0]!.at <= now - SETTLE_MS) this.floor = Math.max(this.floor, this.marks.shift()!.seq);
    for (const seq of this.seen) if (seq <= this.floor) this.seen.delete(seq);

    const fresh: number[] = [];
    for (let from = this.floor; fresh.length < BATCH; ) {
      const seqs = (await queryRows(this.deps.ds, SCAN_SQL, [this.p.accountId, this.p.mode, from])).map((r) => Number(r.seq));
      for (const seq of seqs) if (!this.seen.has(seq) && fresh.length < BATCH) fresh.push(seq);
      if (seqs.length < SCAN) break;
      from = seqs[seqs.length - 1]!;
    }
    if (fresh.length === 0) return [];
    for (const seq of fresh) this.seen.add(seq);
    this.marks.push({ at: now, seq: fresh[fresh.length - 1]! });
    const rows = await fastRepository(this.deps.ds, EventEntity).find({ where: { seq: In(fresh) }, order: { seq: "ASC" } });
    return this.types ? rows.filter((e) => this.types!.has(e.type as EventType)) : rows;
  }
}
