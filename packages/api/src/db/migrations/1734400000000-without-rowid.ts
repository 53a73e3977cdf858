import type { MigrationInterface, QueryRunner } from "typeorm";
import { rebuildSqliteTable } from "./sqlite-rebuild.js";

/**
 * Tables every card creation writes a row of, each keyed by a text primary key: on SQLite a rowid
 * table keeps that key in an index of its own (a second B-tree, written with every row, one more
 * page in each commit's WAL frames). WITHOUT ROWID, the rows are stored in their key's B-tree
 * (BENCHMARKS.md, fix 42). MySQL/MariaDB (InnoDB) store every table by its primary key already.
 */
export const WITHOUT_ROWID_TABLES = ["idempotency_keys", "sim_holds", "sim_cards"];

export class WithoutRowid1734400000000 implements MigrationInterface {
  name = "WithoutRowid1734400000000";

  async up(q: QueryRunner): Promise<void> {
    if (q.connection.options.type === "mysql") return;
    for (const table of WITHOUT_ROWID_TABLES) await rebuildSqliteTable(q, table, (columns) => `${columns} WITHOUT ROWID`);
  }

  async down(q: QueryRunner): Promise<void> {
    if (q.connection.options.type === "mysql") return;
    for (const table of WITHOUT_ROWID_TABLES) await rebuildSqliteTable(q, table, (columns) => columns.replace(/\s*WITHOUT ROWID\s*$/, ""));
  }
}
