import { TableIndex, type MigrationInterface, type QueryRunner } from "typeorm";

const OLD = new TableIndex({ name: "ix_webhook_deliveries_due", columnNames: ["status", "next_attempt_at", "endpoint_id"] });
const NAME = "ix_webhook_deliveries_pending";

/**
 * The delivery queue is claimed per endpoint (WebhookDeliveryQueue.claim): pending deliveries by
 * (endpoint, due time). The index by due time first made every claim step over a hanging
 * endpoint's whole backlog, which grew for as long as the endpoint hung. On SQLite the index is
 * partial (pending rows only): with `status` as its first column, SQLite's planner (no statistics)
 * chose it over the id's unique index for the claim's `UPDATE … WHERE id IN (…) AND status =
 * 'pending'` and read the whole backlog again. Add columns to this table with plain ALTER TABLE:
 * TypeORM's addColumn rebuilds SQLite tables without index conditions.
 */
export class WebhookClaimIndex1733700000000 implements MigrationInterface {
  name = "WebhookClaimIndex1733700000000";

  async up(q: QueryRunner): Promise<void> {
    await q.dropIndex("webhook_deliveries", OLD);
    if (q.connection.options.type === "mysql") {
      await q.createIndex("webhook_deliveries", new TableIndex({ name: NAME, columnNames: ["status", "endpoint_id", "next_attempt_at"] }));
    } else {
      await q.query(`CREATE INDEX "${NAME}" ON "webhook_deliveries" (endpoint_id, next_attempt_at) WHERE status = 'pending'`);
    }
  }

  async down(q: QueryRunner): Promise<void> {
    await q.dropIndex("webhook_deliveries", NAME);
    await q.createIndex("webhook_deliveries", OLD);
  }
}
