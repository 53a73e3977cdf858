import type { MigrationInterface, QueryRunner } from "typeorm";

/**
 * transactions.refund_of: the capture a test helper's refund gives back, so that the refunds of
 * one capture together never exceed it (each alone did, and a card with two captures could have
 * the first refunded twice). A plain ADD COLUMN, as in 1734700000000; the card's index
 * (ix_transactions_card) finds a card's refunds.
 */
export class TransactionRefundOf1734900000000 implements MigrationInterface {
  name = "TransactionRefundOf1734900000000";

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE transactions ADD COLUMN refund_of varchar(40) NULL`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE transactions DROP COLUMN refund_of`);
  }
}
