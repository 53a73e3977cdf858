import { TableIndex, type MigrationInterface, type QueryRunner } from "typeorm";

/**
 * Cards whose processor follow-up is outstanding (the recovery pass's work and the operator's
 * attention list): closed or failed and maybe still live at the processor, a hold still to
 * release, or settled and still to deactivate. SQLite indexes exactly these rows; its planner
 * uses a partial index only for a query that repeats the condition word for word, so the
 * queries are written with this text (CardService).
 */
export const CARD_FOLLOW_UP =
  "(status = 'CLOSED' AND revoked_at IS NULL) OR (status IN ('CLOSED', 'FAILED') AND hold_status IN ('OPEN', 'PENDING'))" +
  " OR (status = 'FAILED' AND revoked_at IS NULL) OR (status = 'USED' AND hold_status = 'CAPTURED' AND revoked_at IS NULL AND processor_card_id IS NOT NULL)";

/**
 * The maintenance sweeps' card indexes, cheaper to keep. ix_cards_expiry (status, expires_at),
 * ix_cards_unrevoked (status, revoked_at, hold_status) and ix_cards_hold_status (status, hold_status)
 * were led by the status, so every card's creation wrote each of them twice (CREATING, then OPEN):
 * ~15% of a SQLite create's CPU (BENCHMARKS.md, fix 33). Now:
 * - ix_cards_expiry is (revoked_at, expires_at): written once at insert and again only when the
 *   card is revoked; the expiry sweeps ask for unrevoked cards past expires_at (an OPEN or USED
 *   card is never revoked while it can still be expired). SQLite keeps only unrevoked cards in it.
 * - SQLite: the follow-up's two indexes become one partial index of the outstanding cards
 *   (CARD_FOLLOW_UP), in recovery order; a card that never needs a follow-up is never in it.
 *   MySQL/MariaDB have no partial indexes and keep the two, which the same condition reads as ranges.
 */
export class CardSweepIndexes1734200000000 implements MigrationInterface {
  name = "CardSweepIndexes1734200000000";

  async up(q: QueryRunner): Promise<void> {
    await q.dropIndex("cards", "ix_cards_expiry");
    if (q.connection.options.type === "mysql") {
      await q.createIndex("cards", new TableIndex({ name: "ix_cards_expiry", columnNames: ["revoked_at", "expires_at"] }));
      return;
    }
    await q.query(`CREATE INDEX "ix_cards_expiry" ON "cards" (expires_at) WHERE revoked_at IS NULL`);
    await q.dropIndex("cards", "ix_cards_unrevoked");
    await q.dropIndex("cards", "ix_cards_hold_status");
    await q.query(`CREATE INDEX "ix_cards_follow_up" ON "cards" (recovery_next_at, seq) WHERE ${CARD_FOLLOW_UP}`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.dropIndex("cards", "ix_cards_expiry");
    await q.createIndex("cards", new TableIndex({ name: "ix_cards_expiry", columnNames: ["status", "expires_at"] }));
    if (q.connection.options.type === "mysql") return;
    await q.query(`DROP INDEX "ix_cards_follow_up"`);
    await q.createIndex("cards", new TableIndex({ name: "ix_cards_unrevoked", columnNames: ["status", "revoked_at", "hold_status"] }));
    await q.createIndex("cards", new TableIndex({ name: "ix_cards_hold_status", columnNames: ["status", "hold_status"] }));
  }
}
