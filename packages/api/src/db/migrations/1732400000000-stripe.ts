import { Table, type MigrationInterface, type QueryRunner } from "typeorm";

/**
 * Stripe adapter state: the Customer and Issuing cardholder kept per account and mode, and the ids
 * of webhook events already handled (Stripe delivers at least once, in any order).
 */
export class Stripe1732400000000 implements MigrationInterface {
  name = "Stripe1732400000000";

  async up(q: QueryRunner): Promise<void> {
    await q.createTable(
      new Table({
        name: "stripe_accounts",
        columns: [
          { name: "account_id", type: "varchar", length: "40", isPrimary: true },
          { name: "mode", type: "varchar", length: "8", isPrimary: true },
          { name: "customer_id", type: "varchar", length: "255", isNullable: true },
          /** Our saved payment method (as the operator set it) that is attached to the customer. */
          { name: "attached_source", type: "varchar", length: "255", isNullable: true },
          /** The id Stripe returned on attach (test tokens such as pm_card_visa become a new pm_…). */
          { name: "payment_method_id", type: "varchar", length: "255", isNullable: true },
          { name: "cardholder_id", type: "varchar", length: "255", isNullable: true },
          { name: "updated_at", type: "bigint" },
        ],
      }),
    );
    await q.createTable(
      new Table({
        name: "stripe_events",
        columns: [
          { name: "id", type: "varchar", length: "255", isPrimary: true },
          { name: "type", type: "varchar", length: "100" },
          /** Null while being handled; then e.g. approved / declined / applied / ignored. */
          { name: "outcome", type: "varchar", length: "32", isNullable: true },
          { name: "received_at", type: "bigint" },
        ],
      }),
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.dropTable("stripe_events");
    await q.dropTable("stripe_accounts");
  }
}
