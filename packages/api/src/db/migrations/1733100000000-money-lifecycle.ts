import { Table, TableColumn, TableIndex, type MigrationInterface, type QueryRunner, type TableColumnOptions } from "typeorm";

const seq = (): TableColumnOptions => ({ name: "seq", type: "integer", isPrimary: true, isGenerated: true, generationStrategy: "increment" });
const str = (name: string, length: number, isNullable = false): TableColumnOptions => ({ name, type: "varchar", length: String(length), isNullable });
const int = (name: string, isNullable = false): TableColumnOptions => ({ name, type: "integer", isNullable });
const ms = (name: string, isNullable = false): TableColumnOptions => ({ name, type: "bigint", isNullable });

/**
 * The card money lifecycle (DESIGN 3.6): authorizations (the network asking "may I charge X?"),
 * transactions (what settles, later, possibly for another amount, and refunds), and payments (the
 * money that moves from or back to the account's payment method because of them). Cards get an
 * expiry (before their hold can lapse) and the money already captured from their hold.
 */
export class MoneyLifecycle1733100000000 implements MigrationInterface {
  name = "MoneyLifecycle1733100000000";

  async up(q: QueryRunner): Promise<void> {
    await q.addColumn("cards", new TableColumn(ms("expires_at", true)));
    // Cards issued before expiry existed get the default lifetime (one day) from their issue.
    await q.query("UPDATE cards SET expires_at = created_at + 86400000");
    await q.createIndex("cards", new TableIndex({ name: "ix_cards_expiry", columnNames: ["status", "expires_at"] }));

    await q.createTable(
      new Table({
        name: "authorizations",
        columns: [
          seq(),
          str("id", 40),
          str("account_id", 40),
          str("mode", 8),
          str("card_id", 40),
          /** Stripe's iauth_…; null for the simulated processor's test helpers. */
          str("processor_authorization_id", 255, true),
          int("amount_cents"),
          { name: "approved", type: "boolean" },
          str("decline_reason", 64, true),
          /** pending (approved, not yet settled), closed, reversed, expired. */
          str("status", 16),
          str("merchant_name", 200, true),
          str("merchant_category", 100, true),
          str("merchant_country", 2, true),
          /** True when this authorization made its card USED (a reversal gives the card back). */
          { name: "consumed_card", type: "boolean" },
          ms("created_at"),
          ms("updated_at"),
        ],
        indices: [
          new TableIndex({ name: "uq_authorizations_id", columnNames: ["id"], isUnique: true }),
          new TableIndex({ name: "uq_authorizations_processor", columnNames: ["processor_authorization_id"], isUnique: true }),
          new TableIndex({ name: "ix_authorizations_list", columnNames: ["account_id", "mode", "seq"] }),
          new TableIndex({ name: "ix_authorizations_card", columnNames: ["card_id", "seq"] }),
        ],
      }),
    );
    await q.createTable(
      new Table({
        name: "transactions",
        columns: [
          seq(),
          str("id", 40),
          str("account_id", 40),
          str("mode", 8),
          str("card_id", 40),
          str("authorization_id", 40, true),
          /** Stripe's ipi_…; null for the simulated processor's test helpers. */
          str("processor_transaction_id", 255, true),
          /** capture (money spent at a merchant) or refund (money back from it). */
          str("type", 16),
          int("amount_cents"),
          str("merchant_name", 200, true),
          ms("created_at"),
        ],
        indices: [
          new TableIndex({ name: "uq_transactions_id", columnNames: ["id"], isUnique: true }),
          new TableIndex({ name: "uq_transactions_processor", columnNames: ["processor_transaction_id"], isUnique: true }),
          new TableIndex({ name: "ix_transactions_list", columnNames: ["account_id", "mode", "seq"] }),
          new TableIndex({ name: "ix_transactions_card", columnNames: ["card_id", "seq"] }),
        ],
      }),
    );
    await q.createTable(
      new Table({
        name: "payments",
        columns: [
          seq(),
          str("id", 40),
          str("account_id", 40),
          str("mode", 8),
          str("card_id", 40),
          str("transaction_id", 40),
          /** hold_capture (from the card's hold), charge (off-session, beyond the hold), refund. */
          str("kind", 16),
          int("amount_cents"),
          /** pending → succeeded | uncollected (a charge that failed) | attention (repeated failures). */
          str("status", 16),
          /** The payment a refund goes back through (the hold's PaymentIntent or a charge). */
          str("refund_of", 40, true),
          str("processor_payment_id", 255, true),
          int("attempts"),
          ms("next_attempt_at", true),
          str("last_error", 500, true),
          ms("lease_until", true),
          ms("created_at"),
          ms("updated_at"),
        ],
        indices: [
          new TableIndex({ name: "uq_payments_id", columnNames: ["id"], isUnique: true }),
          new TableIndex({ name: "ix_payments_transaction", columnNames: ["transaction_id"] }),
          new TableIndex({ name: "ix_payments_card", columnNames: ["card_id", "seq"] }),
          new TableIndex({ name: "ix_payments_queue", columnNames: ["status", "next_attempt_at"] }),
          // The balance's uncollected sum: one account's range, covered.
          new TableIndex({ name: "ix_payments_account", columnNames: ["account_id", "mode", "status", "amount_cents"] }),
        ],
      }),
    );
    // The simulated processor's refunds, one per idempotency key (its charges live in sim_holds).
    await q.createTable(
      new Table({
        name: "sim_refunds",
        columns: [{ ...str("id", 40), isPrimary: true }, str("idempotency_key", 255), str("payment_id", 40), int("amount_cents"), ms("created_at")],
        indices: [new TableIndex({ name: "uq_sim_refunds_key", columnNames: ["idempotency_key"], isUnique: true })],
      }),
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.dropTable("sim_refunds");
    await q.dropTable("payments");
    await q.dropTable("transactions");
    await q.dropTable("authorizations");
    await q.dropIndex("cards", "ix_cards_expiry");
    await q.dropColumn("cards", "expires_at");
  }
}
