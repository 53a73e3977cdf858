import type { MigrationInterface, QueryRunner } from "typeorm";
import { makeCardIndexesPartial } from "./1732700000000-partial-indexes.js";

/**
 * SQLite: TypeORM's addColumn rebuilds a table and recreates its indexes without their WHERE
 * clauses, so the columns added to `cards` since 1732700000000 (decision keys, expiry) turned the
 * partial indexes back into full ones. They are made partial again; the migrations after this one
 * add columns with plain ALTER TABLE, which keeps them (test/migrations.test.ts checks).
 */
export class PartialIndexesAgain1733300000000 implements MigrationInterface {
  name = "PartialIndexesAgain1733300000000";

  async up(q: QueryRunner): Promise<void> {
    await makeCardIndexesPartial(q);
  }

  // Nothing to undo: the indexes' columns are the same either way.
  async down(): Promise<void> {}
}
