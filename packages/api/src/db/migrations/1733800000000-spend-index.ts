import { TableIndex, type MigrationInterface, type QueryRunner } from "typeorm";

const INDEX = new TableIndex({ name: "ix_transactions_time", columnNames: ["account_id", "mode", "created_at"] });

/**
 * The dashboard's daily spend (SpendService.daily) sums an account's transactions of one mode
 * since a day: by time, this index reads only that period, not every transaction the account ever had.
 */
export class SpendIndex1733800000000 implements MigrationInterface {
  name = "SpendIndex1733800000000";

  async up(q: QueryRunner): Promise<void> {
    await q.createIndex("transactions", INDEX);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.dropIndex("transactions", INDEX.name!);
  }
}
