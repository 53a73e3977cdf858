import { Table, TableColumn, type MigrationInterface, type QueryRunner } from "typeorm";

/**
 * Failed sign-ins counted per email whether an owner has it or not (keyed by the email's SHA-256,
 * so unknown emails are not stored), so that being blocked tells nobody which emails are owners'.
 * The owners' own counters go.
 */
export class SignInFailures1734800000000 implements MigrationInterface {
  name = "SignInFailures1734800000000";

  async up(q: QueryRunner): Promise<void> {
    await q.createTable(
      new Table({
        name: "sign_in_failures",
        columns: [
          { name: "email_hash", type: "varchar", length: "64", isPrimary: true },
          { name: "failures", type: "integer" },
          { name: "blocked_until", type: "bigint", isNullable: true },
          { name: "updated_at", type: "bigint" },
        ],
      }),
    );
    await q.query("ALTER TABLE owners DROP COLUMN failed_sign_ins");
    await q.query("ALTER TABLE owners DROP COLUMN blocked_until");
  }

  async down(q: QueryRunner): Promise<void> {
    await q.addColumn("owners", new TableColumn({ name: "failed_sign_ins", type: "integer", default: 0 }));
    await q.addColumn("owners", new TableColumn({ name: "blocked_until", type: "bigint", isNullable: true }));
    await q.dropTable("sign_in_failures");
  }
}
