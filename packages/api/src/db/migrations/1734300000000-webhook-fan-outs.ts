import { Table, type MigrationInterface, type QueryRunner } from "typeorm";

/**
 * The outbox's fan-out in two steps: an event's transaction writes one row here (the enabled
 * endpoints that take it, as they were then) instead of a delivery row per endpoint, and a delivery
 * worker turns these rows into delivery rows, many events per transaction, moments later. The rows
 * live for milliseconds: a small, hot table, read by its key.
 */
export class WebhookFanOuts1734300000000 implements MigrationInterface {
  name = "WebhookFanOuts1734300000000";

  async up(q: QueryRunner): Promise<void> {
    await q.createTable(
      new Table({
        name: "webhook_fan_outs",
        columns: [
          { name: "event_id", type: "varchar", length: "40", isPrimary: true },
          /** The endpoints' ids, comma-separated. */
          { name: "endpoint_ids", type: "text" },
          /** The instance that writes its deliveries (its worker's token) while its lease lasts; null: any instance. */
          { name: "lease_token", type: "varchar", length: "40", isNullable: true },
          /** Until when only that instance may (ms); after it, any instance does. */
          { name: "lease_until", type: "bigint" },
        ],
      }),
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.dropTable("webhook_fan_outs");
  }
}
