import { queryRows } from "../db/fast.js";
import type { Deps, Principal } from "./deps.js";
import { DAY_MS, isoTime } from "./ids.js";

/** One UTC day of settled money: captures minus refunds, and how many transactions made it. */
export interface DailySpend {
  /** YYYY-MM-DD, UTC. */
  date: string;
  spent_cents: number;
  transactions: number;
}

/**
 * Settled money per UTC day, in one aggregate over the account's transactions of the mode since
 * the first day's midnight. `created_at - created_at % DAY` is the day's start in milliseconds on
 * both SQLite (integer arithmetic) and MariaDB (no FLOOR or DIV, which SQLite lacks). The index by
 * time is pinned (FORCE INDEX / INDEXED BY): MariaDB's sampled statistics may pick the list's
 * index by seq instead and read every transaction the account ever had.
 */
const dailySql = (table: string) =>
  `SELECT created_at - (created_at % ${DAY_MS}) AS day, ` +
  "SUM(CASE WHEN type = 'refund' THEN -amount_cents ELSE amount_cents END) AS spent, COUNT(*) AS n " +
  `FROM ${table} WHERE account_id = ? AND mode = ? AND created_at >= ? GROUP BY day`;
const DAILY_SQL = {
  mysql: dailySql("transactions FORCE INDEX (ix_transactions_time)"),
  sqlite: dailySql("transactions INDEXED BY ix_transactions_time"),
};

/** What the account spent: the dashboard's chart of daily spend (tRPC `spend.daily`). */
export class SpendService {
  constructor(private readonly deps: Deps) {}

  /** The last `days` UTC days, oldest first, today last; days without transactions are zero. */
  async daily(p: Principal, days: number, now = Date.now()): Promise<DailySpend[]> {
    const first = now - (now % DAY_MS) - (days - 1) * DAY_MS;
    const sql = DAILY_SQL[this.deps.ds.options.type === "mysql" ? "mysql" : "sqlite"];
    const rows = (await queryRows(this.deps.ds, sql, [p.accountId, p.mode, first])) as { day: unknown; spent: unknown; n: unknown }[];
    const byDay = new Map(rows.map((r) => [Number(r.day), r]));
    return Array.from({ length: days }, (_, i) => {
      const day = first + i * DAY_MS;
      const row = byDay.get(day);
      return { date: isoTime(day).slice(0, 10), spent_cents: Number(row?.spent ?? 0), transactions: Number(row?.n ?? 0) };
    });
  }
}
