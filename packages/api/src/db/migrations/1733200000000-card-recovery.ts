import { TableIndex, type MigrationInterface, type QueryRunner } from "typeorm";

/**
 * The recovery pass's queue of cards whose processor follow-up (revoke, hold release) failed: how
 * many attempts failed, when the next is due (exponential backoff; null: now) and the last error,
 * and whether the card was given up on and needs an operator.
 */
export class CardRecovery1733200000000 implements MigrationInterface {
  name = "CardRecovery1733200000000";

  async up(q: QueryRunner): Promise<void> {
    // Plain ADD COLUMNs, the same on both databases: TypeORM's addColumn rebuilds the table on
    // SQLite, copying every card, and the rebuilt indexes lose their WHERE clauses.
    for (const column of ["recovery_attempts integer NOT NULL DEFAULT 0", "recovery_next_at bigint NULL", "recovery_error varchar(500) NULL", "needs_attention boolean NOT NULL DEFAULT 0"])
      await q.query(`ALTER TABLE cards ADD COLUMN ${column}`);
    // The recovery pass's leftovers (CLOSED or USED not revoked, CLOSED or FAILED with a hold) as
    // exact ranges of these two (SQLite: a multi-index OR; MariaDB: an index merge), which the
    // many cards that ended revoked with their hold settled are not in. An index led by
    // needs_attention matched every card: MariaDB chose it and read them all (300 ms on 100,000
    // cards, against 60 ms for the table scan before and 4 ms with these).
    await q.createIndex("cards", new TableIndex({ name: "ix_cards_unrevoked", columnNames: ["status", "revoked_at", "hold_status"] }));
    await q.createIndex("cards", new TableIndex({ name: "ix_cards_hold_status", columnNames: ["status", "hold_status"] }));
  }

  async down(q: QueryRunner): Promise<void> {
    await q.dropIndex("cards", "ix_cards_hold_status");
    await q.dropIndex("cards", "ix_cards_unrevoked");
    await q.dropColumns("cards", ["needs_attention", "recovery_error", "recovery_next_at", "recovery_attempts"]);
  }
}
