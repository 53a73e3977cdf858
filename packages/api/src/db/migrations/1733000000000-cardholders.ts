import { TableColumn, type MigrationInterface, type QueryRunner } from "typeorm";

/**
 * Cardholders per account (DESIGN 3.3, 3.6): the operator's cardholder details on the account (one
 * JSON text column, null until set), and on the Stripe adapter's row the hash of the details its
 * Issuing cardholder was last created or updated with, so a change reaches Stripe on the next card.
 * Both nullable, so existing rows need no default (TEXT columns take none on MySQL).
 */
export class Cardholders1733000000000 implements MigrationInterface {
  name = "Cardholders1733000000000";

  async up(q: QueryRunner): Promise<void> {
    await q.addColumn("accounts", new TableColumn({ name: "cardholder", type: "text", isNullable: true }));
    await q.addColumn("stripe_accounts", new TableColumn({ name: "cardholder_hash", type: "varchar", length: "64", isNullable: true }));
  }

  async down(q: QueryRunner): Promise<void> {
    await q.dropColumn("stripe_accounts", "cardholder_hash");
    await q.dropColumn("accounts", "cardholder");
  }
}
