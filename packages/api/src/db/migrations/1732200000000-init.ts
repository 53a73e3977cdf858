import { Table, TableIndex, type MigrationInterface, type QueryRunner, type TableColumnOptions } from "typeorm";

const id = (name = "id"): TableColumnOptions => ({ name, type: "varchar", length: "40", isPrimary: true });
const seq = (): TableColumnOptions => ({
  name: "seq",
  type: "integer",
  isPrimary: true,
  isGenerated: true,
  generationStrategy: "increment",
});
const str = (name: string, length: number, isNullable = false): TableColumnOptions => ({
  name,
  type: "varchar",
  length: String(length),
  isNullable,
});
const int = (name: string, isNullable = false): TableColumnOptions => ({ name, type: "integer", isNullable });
const ms = (name: string, isNullable = false): TableColumnOptions => ({ name, type: "bigint", isNullable });
const bool = (name: string): TableColumnOptions => ({ name, type: "boolean" });

/** Portable schema: only column types both SQLite and MySQL/MariaDB understand the same way. */
export class Init1732200000000 implements MigrationInterface {
  name = "Init1732200000000";

  async up(q: QueryRunner): Promise<void> {
    await q.createTable(
      new Table({
        name: "accounts",
        columns: [id(), str("name", 200), bool("kyb_verified"), str("payment_method", 255, true), ms("created_at")],
      }),
    );
    await q.createTable(
      new Table({
        name: "api_keys",
        columns: [
          id(),
          str("account_id", 40),
          str("mode", 8),
          str("role", 8),
          str("name", 200, true),
          str("secret_hash", 64),
          str("prefix", 16),
          str("last4", 4),
          ms("created_at"),
          ms("revoked_at", true),
        ],
        indices: [
          new TableIndex({ name: "uq_api_keys_hash", columnNames: ["secret_hash"], isUnique: true }),
          new TableIndex({ name: "ix_api_keys_account", columnNames: ["account_id", "created_at"] }),
        ],
      }),
    );
    await q.createTable(
      new Table({
        name: "policies",
        columns: [
          { ...str("account_id", 40), isPrimary: true },
          { ...str("mode", 8), isPrimary: true },
          bool("approval_required"),
          int("max_amount_cents"),
          ms("updated_at"),
        ],
      }),
    );
    await q.createTable(
      new Table({
        name: "cards",
        columns: [
          seq(),
          str("id", 40),
          str("account_id", 40),
          str("mode", 8),
          str("status", 16),
          int("amount_cents"),
          int("remaining_cents"),
          int("spent_cents"),
          str("agent_id", 255, true),
          str("purpose", 500, true),
          str("last_four", 4, true),
          str("expiration", 5, true),
          str("processor_card_id", 255, true),
          str("hold_id", 255, true),
          str("hold_status", 16),
          str("approval_id", 40, true),
          str("creation_key", 255, true),
          ms("lease_until", true),
          ms("revoked_at", true),
          ms("created_at"),
          ms("closed_at", true),
          ms("used_at", true),
        ],
        indices: [
          new TableIndex({ name: "uq_cards_id", columnNames: ["id"], isUnique: true }),
          // One card per approval and per idempotent create, whatever races or retries happen.
          new TableIndex({ name: "uq_cards_approval", columnNames: ["approval_id"], isUnique: true }),
          new TableIndex({ name: "uq_cards_creation_key", columnNames: ["creation_key"], isUnique: true }),
          new TableIndex({ name: "uq_cards_processor_card", columnNames: ["processor_card_id"], isUnique: true }),
          new TableIndex({ name: "ix_cards_list", columnNames: ["account_id", "mode", "seq"] }),
          new TableIndex({ name: "ix_cards_status", columnNames: ["account_id", "mode", "status", "seq"] }),
          new TableIndex({ name: "ix_cards_agent", columnNames: ["account_id", "mode", "agent_id", "seq"] }),
          new TableIndex({ name: "ix_cards_hold", columnNames: ["account_id", "mode", "hold_status"] }),
          new TableIndex({ name: "ix_cards_recovery", columnNames: ["status", "lease_until"] }),
        ],
      }),
    );
    await q.createTable(
      new Table({
        name: "approvals",
        columns: [
          seq(),
          str("id", 40),
          str("account_id", 40),
          str("mode", 8),
          int("amount_cents"),
          str("agent_id", 255, true),
          str("purpose", 500, true),
          int("override_max_cents", true),
          str("status", 16),
          str("reason", 500, true),
          str("card_id", 40, true),
          str("creation_key", 255, true),
          ms("expires_at"),
          ms("created_at"),
          ms("decided_at", true),
        ],
        indices: [
          new TableIndex({ name: "uq_approvals_id", columnNames: ["id"], isUnique: true }),
          new TableIndex({ name: "uq_approvals_creation_key", columnNames: ["creation_key"], isUnique: true }),
          new TableIndex({ name: "ix_approvals_list", columnNames: ["account_id", "mode", "status", "seq"] }),
          new TableIndex({ name: "ix_approvals_expiry", columnNames: ["status", "expires_at"] }),
        ],
      }),
    );
    // State of the simulated processor: an outside system in spirit, kept in its own tables.
    await q.createTable(
      new Table({
        name: "sim_holds",
        columns: [
          { ...str("id", 40), isPrimary: true },
          str("idempotency_key", 255),
          str("mode", 8),
          str("payment_method", 255),
          int("amount_cents"),
          int("captured_cents"),
          str("status", 24),
          ms("created_at"),
        ],
        indices: [new TableIndex({ name: "uq_sim_holds_key", columnNames: ["idempotency_key"], isUnique: true })],
      }),
    );
    await q.createTable(
      new Table({
        name: "sim_cards",
        columns: [
          { ...str("id", 40), isPrimary: true },
          str("idempotency_key", 255),
          str("mode", 8),
          str("number", 19),
          str("cvc", 4),
          int("exp_month"),
          int("exp_year"),
          int("spending_limit_cents"),
          str("status", 16),
          str("card_ref", 40),
          ms("created_at"),
        ],
        indices: [new TableIndex({ name: "uq_sim_cards_key", columnNames: ["idempotency_key"], isUnique: true })],
      }),
    );
    await q.createTable(
      new Table({
        name: "sim_ephemeral_keys",
        columns: [{ ...str("secret_hash", 64), isPrimary: true }, str("card_id", 40), ms("expires_at")],
      }),
    );
    await q.createTable(
      new Table({
        name: "settings",
        columns: [{ ...str("name", 64), isPrimary: true }, { name: "value", type: "text" }],
      }),
    );
  }

  async down(q: QueryRunner): Promise<void> {
    for (const t of ["settings", "sim_ephemeral_keys", "sim_cards", "sim_holds", "approvals", "cards", "policies", "api_keys", "accounts"])
      await q.dropTable(t);
  }
}
