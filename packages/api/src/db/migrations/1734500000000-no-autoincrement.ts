import type { MigrationInterface, QueryRunner } from "typeorm";
import { rebuildSqliteTable } from "./sqlite-rebuild.js";

/**
 * The tables whose rows every card creation adds, keyed by `seq INTEGER PRIMARY KEY`, without
 * SQLite's AUTOINCREMENT. AUTOINCREMENT keeps each table's highest key in `sqlite_sequence`, one
 * more row updated (and one more page in the commit's WAL frames) by every insert. Without it a new
 * row takes the highest key + 1, the same numbers as long as the highest row is never deleted:
 * cards are never deleted, and the events' purge keeps the newest event (EventService). ~1 WAL
 * frame less per card created (BENCHMARKS.md, fix 44). MySQL/MariaDB keep AUTO_INCREMENT.
 */
export const NO_AUTOINCREMENT_TABLES = ["cards", "events"];

export class NoAutoincrement1734500000000 implements MigrationInterface {
  name = "NoAutoincrement1734500000000";

  async up(q: QueryRunner): Promise<void> {
    if (q.connection.options.type === "mysql") return;
    // Dropping the old table drops its row of sqlite_sequence too.
    for (const table of NO_AUTOINCREMENT_TABLES) await rebuildSqliteTable(q, table, (columns) => columns.replace(" PRIMARY KEY AUTOINCREMENT", " PRIMARY KEY"));
  }

  async down(q: QueryRunner): Promise<void> {
    if (q.connection.options.type === "mysql") return;
    // AUTOINCREMENT back: SQLite records the highest key of the copied rows in sqlite_sequence itself.
    for (const table of NO_AUTOINCREMENT_TABLES)
      await rebuildSqliteTable(q, table, (columns) => columns.replace(/"seq" integer PRIMARY KEY(?! AUTOINCREMENT)/, '"seq" integer PRIMARY KEY AUTOINCREMENT'));
  }
}
