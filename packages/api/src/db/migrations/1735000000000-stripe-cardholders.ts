import { Table, TableIndex, type MigrationInterface, type QueryRunner } from "typeorm";

/**
 * Every Issuing cardholder the Stripe adapter has used per account and mode, so that a lookup of a
 * card's Issuing cards lists that account's cardholders' cards, not every card of the platform.
 * An account's cardholder at the time of this migration is copied in as `backfilled`: the ones it
 * had before are unknown (and instances of the older version may still make some during a rolling
 * upgrade), so cards made up to a day after it are still looked up among all cards.
 */
export class StripeCardholders1735000000000 implements MigrationInterface {
  name = "StripeCardholders1735000000000";

  async up(q: QueryRunner): Promise<void> {
    await q.createTable(
      new Table({
        name: "stripe_cardholders",
        columns: [
          { name: "cardholder_id", type: "varchar", length: "255", isPrimary: true },
          { name: "account_id", type: "varchar", length: "40" },
          { name: "mode", type: "varchar", length: "8" },
          /** When the adapter first saved it as the account's cardholder: no card was minted under it before. */
          { name: "created_at", type: "bigint" },
          { name: "backfilled", type: "boolean", default: false },
        ],
      }),
    );
    await q.createIndex("stripe_cardholders", new TableIndex({ name: "ix_stripe_cardholders_account", columnNames: ["account_id", "mode", "created_at"] }));
    await q.query(
      `INSERT INTO stripe_cardholders (cardholder_id, account_id, mode, created_at, backfilled)
       SELECT cardholder_id, account_id, mode, ?, 1 FROM stripe_accounts WHERE cardholder_id IS NOT NULL`,
      [Date.now()],
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.dropTable("stripe_cardholders");
  }
}
