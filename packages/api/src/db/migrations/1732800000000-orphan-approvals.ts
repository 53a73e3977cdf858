import type { MigrationInterface, QueryRunner } from "typeorm";

/**
 * Before an approval's claim and its card's intent record committed together, a crash between
 * the two left approvals APPROVED with a card that never came to exist (or that failed without
 * giving the approval back). They go back to PENDING, where they can be approved again.
 */
export class OrphanApprovals1732800000000 implements MigrationInterface {
  name = "OrphanApprovals1732800000000";

  async up(q: QueryRunner): Promise<void> {
    await q.query(
      `UPDATE approvals SET status = 'PENDING', card_id = NULL, decided_at = NULL
       WHERE status = 'APPROVED' AND NOT EXISTS (SELECT 1 FROM cards WHERE cards.id = approvals.card_id AND cards.status <> 'FAILED')`,
    );
    await q.query("UPDATE cards SET approval_id = NULL WHERE status = 'FAILED' AND approval_id IS NOT NULL");
  }

  async down(): Promise<void> {
    // Data repair only: nothing to undo.
  }
}
