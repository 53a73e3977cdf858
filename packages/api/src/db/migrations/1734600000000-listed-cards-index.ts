import { TableIndex, type MigrationInterface, type QueryRunner } from "typeorm";

/** The cards a list by status can show: the API's statuses (a CREATING or FAILED card is never listed). */
export const LISTED_CARDS = "status IN ('OPEN', 'USED', 'CLOSED')";

/**
 * SQLite: ix_cards_status (account, mode, status, seq), which serves the lists filtered by status,
 * holds only the cards those lists can show. Every card was written to it twice, in CREATING with
 * its intent record and again in OPEN, on two leaves of the index, both in nearly every group
 * commit; now once, when it opens (BENCHMARKS.md, fix 45). The list queries repeat the condition
 * word for word (CardService.list), as SQLite's planner requires. MySQL/MariaDB have no partial
 * indexes and keep the whole index.
 */
export class ListedCardsIndex1734600000000 implements MigrationInterface {
  name = "ListedCardsIndex1734600000000";

  async up(q: QueryRunner): Promise<void> {
    if (q.connection.options.type === "mysql") return;
    await q.query(`DROP INDEX "ix_cards_status"`);
    await q.query(`CREATE INDEX "ix_cards_status" ON "cards" (account_id, mode, status, seq) WHERE ${LISTED_CARDS}`);
  }

  async down(q: QueryRunner): Promise<void> {
    if (q.connection.options.type === "mysql") return;
    await q.query(`DROP INDEX "ix_cards_status"`);
    await q.createIndex("cards", new TableIndex({ name: "ix_cards_status", columnNames: ["account_id", "mode", "status", "seq"] }));
  }
}
