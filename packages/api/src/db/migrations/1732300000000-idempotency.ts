import { Table, TableIndex, type MigrationInterface, type QueryRunner } from "typeorm";

/** Stored responses of POSTs made with an Idempotency-Key, per API key, kept 24 h. */
export class Idempotency1732300000000 implements MigrationInterface {
  name = "Idempotency1732300000000";

  async up(q: QueryRunner): Promise<void> {
    await q.createTable(
      new Table({
        name: "idempotency_keys",
        columns: [
          { name: "api_key_id", type: "varchar", length: "40", isPrimary: true },
          { name: "idem_key", type: "varchar", length: "200", isPrimary: true },
          { name: "request_hash", type: "varchar", length: "64" },
          { name: "status", type: "varchar", length: "16" },
          { name: "response_status", type: "integer", isNullable: true },
          { name: "response_body", type: "text", isNullable: true },
          { name: "locked_until", type: "bigint" },
          { name: "created_at", type: "bigint" },
          { name: "expires_at", type: "bigint" },
        ],
        indices: [new TableIndex({ name: "ix_idempotency_expiry", columnNames: ["expires_at"] })],
      }),
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.dropTable("idempotency_keys");
  }
}
