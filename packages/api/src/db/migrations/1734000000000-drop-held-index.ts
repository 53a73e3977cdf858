import { TableIndex, type MigrationInterface, type QueryRunner } from "typeorm";

/**
 * ix_cards_held (account, mode, hold status, amount) served the spend summary's held sum; the
 * summary now reads card_balances (1733900000000), and no other query filters an account's cards
 * by hold status. Every card insert and every hold transition paid for its entries.
 */
export class DropHeldIndex1734000000000 implements MigrationInterface {
  name = "DropHeldIndex1734000000000";

  async up(q: QueryRunner): Promise<void> {
    await q.dropIndex("cards", "ix_cards_held");
  }

  async down(q: QueryRunner): Promise<void> {
    await q.createIndex("cards", new TableIndex({ name: "ix_cards_held", columnNames: ["account_id", "mode", "hold_status", "amount_cents"] }));
  }
}
