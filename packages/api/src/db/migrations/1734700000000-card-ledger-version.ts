import type { MigrationInterface, QueryRunner } from "typeorm";

/**
 * cards.ledger_version: bumped by every settlement and refund of the card, in the transaction that
 * moves its spent_cents, so one computed from a reading of the card's money commits only if
 * nothing moved it since (CardLifecycle). A plain ADD COLUMN: on SQLite, TypeORM's addColumn
 * rebuilds the table, and the rebuild would drop the card_balances triggers (1733900000000).
 */
export class CardLedgerVersion1734700000000 implements MigrationInterface {
  name = "CardLedgerVersion1734700000000";

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE cards ADD COLUMN ledger_version integer NOT NULL DEFAULT 0`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE cards DROP COLUMN ledger_version`);
  }
}
