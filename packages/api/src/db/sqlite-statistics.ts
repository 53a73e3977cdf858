import type { SqliteConnection } from "./sqlite-connection.js";

/**
 * Empties `sqlite_stat4` (ANALYZE's samples of index keys) when the server opens its SQLite file,
 * keeping `sqlite_stat1` (row counts per index, which is what the planner needs here).
 *
 * better-sqlite3 is built with SQLITE_ENABLE_STAT4. With samples present, the planner reads the
 * values bound to a statement when it plans it (an equality on a non-unique index, say an
 * account's cards or balance slots), and SQLite then prepares that statement again whenever its
 * parameters are bound, that is on every run: 10–20 µs per statement, and a statement prepared
 * once with samples keeps doing so for the connection's life. The server binds new values to its
 * cached statements on every request, so after an ANALYZE its reads cost about twice as much
 * (BENCHMARKS.md, fix 49). better-sqlite3 exposes no switch for it (SQLITE_DBCONFIG_ENABLE_QPSG),
 * so the samples go, the way SQLite documents for editing its statistics, before the connection
 * prepares anything.
 */
export function dropStat4Samples(db: SqliteConnection): void {
  if (!db.prepare("SELECT 1 FROM sqlite_schema WHERE name = 'sqlite_stat4'").get()) return;
  // Reloads the statistics the connection already read with the schema.
  if (db.prepare("DELETE FROM sqlite_stat4").run().changes > 0) db.exec("ANALYZE sqlite_schema");
}
