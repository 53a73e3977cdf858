import type { MigrationInterface, QueryRunner } from "typeorm";

/** Exact comparison: binary, and NO PAD where the server has it (MariaDB, MySQL 8). */
const PREFERRED = ["utf8mb4_nopad_bin", "utf8mb4_0900_bin", "utf8mb4_bin"];

/**
 * MySQL/MariaDB compare strings under the database's default collation, usually case- and
 * trailing-space-insensitive (utf8mb4_general_ci): card ids, agent_id filters and Idempotency-Keys
 * that differ only in case matched each other there, and not on SQLite. Every table, and the
 * database default for tables made later, moves to an exact binary collation. No-op on SQLite.
 */
export class BinaryCollation1732500000000 implements MigrationInterface {
  name = "BinaryCollation1732500000000";

  async up(q: QueryRunner): Promise<void> {
    if (q.connection.options.type !== "mysql") return;
    const available: { name: string }[] = await q.query(
      `SELECT COLLATION_NAME AS name FROM information_schema.COLLATIONS WHERE COLLATION_NAME IN (${PREFERRED.map(() => "?").join(", ")})`,
      PREFERRED,
    );
    const collation = PREFERRED.find((c) => available.some((a) => a.name === c))!;
    await q.query(`ALTER DATABASE CHARACTER SET utf8mb4 COLLATE ${collation}`);
    const tables: { name: string }[] = await q.query(
      "SELECT TABLE_NAME AS name FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_TYPE = 'BASE TABLE'",
    );
    for (const { name } of tables) await q.query(`ALTER TABLE \`${name}\` CONVERT TO CHARACTER SET utf8mb4 COLLATE ${collation}`);
  }

  async down(): Promise<void> {
    // The case-insensitive default was never intended; nothing to restore.
  }
}
