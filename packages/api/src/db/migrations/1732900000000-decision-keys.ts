import { TableColumn, type MigrationInterface, type QueryRunner } from "typeorm";

/**
 * The request (`<api key id>:<Idempotency-Key>:<claimed at>`) that decided an approval, and the one
 * whose purchase used a card: a retry of that same request, after its answer was lost, answers
 * as the first did instead of "no longer pending" / "card not open".
 */
export class DecisionKeys1732900000000 implements MigrationInterface {
  name = "DecisionKeys1732900000000";

  async up(q: QueryRunner): Promise<void> {
    await q.addColumn("approvals", new TableColumn({ name: "decision_key", type: "varchar", length: "255", isNullable: true }));
    await q.addColumn("cards", new TableColumn({ name: "used_key", type: "varchar", length: "255", isNullable: true }));
  }

  async down(q: QueryRunner): Promise<void> {
    await q.dropColumn("cards", "used_key");
    await q.dropColumn("approvals", "decision_key");
  }
}
