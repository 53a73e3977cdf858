import { TableIndex, type MigrationInterface, type QueryRunner } from "typeorm";

/**
 * The balance sums the amounts of an account's open holds. ix_cards_hold found those rows but
 * each one was then read from the table; with amount_cents in the index the sum never leaves it.
 */
export class HeldIndex1732600000000 implements MigrationInterface {
  name = "HeldIndex1732600000000";

  async up(q: QueryRunner): Promise<void> {
    await q.createIndex("cards", new TableIndex({ name: "ix_cards_held", columnNames: ["account_id", "mode", "hold_status", "amount_cents"] }));
    await q.dropIndex("cards", "ix_cards_hold");
  }

  async down(q: QueryRunner): Promise<void> {
    await q.createIndex("cards", new TableIndex({ name: "ix_cards_hold", columnNames: ["account_id", "mode", "hold_status"] }));
    await q.dropIndex("cards", "ix_cards_held");
  }
}
