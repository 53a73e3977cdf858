import { Table, TableIndex, type MigrationInterface, type QueryRunner, type TableColumnOptions } from "typeorm";

const str = (name: string, length: number, isNullable = false): TableColumnOptions => ({ name, type: "varchar", length: String(length), isNullable });
const ms = (name: string, isNullable = false): TableColumnOptions => ({ name, type: "bigint", isNullable });

/** Owners of accounts, their invites and their dashboard sessions (DESIGN 3.9). */
export class Owners1733600000000 implements MigrationInterface {
  name = "Owners1733600000000";

  async up(q: QueryRunner): Promise<void> {
    await q.createTable(
      new Table({
        name: "owners",
        columns: [
          { ...str("id", 40), isPrimary: true },
          str("account_id", 40),
          str("email", 254),
          str("password_hash", 200, true),
          { name: "failed_sign_ins", type: "integer", default: 0 },
          ms("blocked_until", true),
          ms("created_at"),
        ],
        indices: [new TableIndex({ name: "uq_owners_email", columnNames: ["email"], isUnique: true }), new TableIndex({ name: "ix_owners_account", columnNames: ["account_id"] })],
      }),
    );
    await q.createTable(
      new Table({
        name: "owner_invites",
        columns: [{ ...str("id", 40), isPrimary: true }, str("account_id", 40), str("email", 254), str("token_hash", 64), ms("created_at"), ms("expires_at"), ms("used_at", true)],
        indices: [new TableIndex({ name: "uq_owner_invites_token", columnNames: ["token_hash"], isUnique: true })],
      }),
    );
    await q.createTable(
      new Table({
        name: "owner_sessions",
        columns: [
          { ...str("id", 40), isPrimary: true },
          str("owner_id", 40),
          str("account_id", 40),
          str("token_hash", 64),
          str("csrf_token", 64),
          ms("created_at"),
          ms("expires_at"),
          ms("revoked_at", true),
        ],
        indices: [
          new TableIndex({ name: "uq_owner_sessions_token", columnNames: ["token_hash"], isUnique: true }),
          new TableIndex({ name: "ix_owner_sessions_owner", columnNames: ["owner_id"] }),
        ],
      }),
    );
  }

  async down(q: QueryRunner): Promise<void> {
    for (const t of ["owner_sessions", "owner_invites", "owners"]) await q.dropTable(t);
  }
}
