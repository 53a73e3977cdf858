import { Table, TableIndex, type MigrationInterface, type QueryRunner, type TableColumnOptions } from "typeorm";

const seq = (): TableColumnOptions => ({ name: "seq", type: "integer", isPrimary: true, isGenerated: true, generationStrategy: "increment" });
const str = (name: string, length: number, isNullable = false): TableColumnOptions => ({ name, type: "varchar", length: String(length), isNullable });
const ms = (name: string, isNullable = false): TableColumnOptions => ({ name, type: "bigint", isNullable });

/**
 * Outgoing webhooks (DESIGN 3.7): the endpoints an account's events are sent to, and one delivery
 * row per event and endpoint, written with the event (the outbox's fan-out) and worked off by the
 * delivery worker of every instance under leases.
 */
export class Webhooks1733500000000 implements MigrationInterface {
  name = "Webhooks1733500000000";

  async up(q: QueryRunner): Promise<void> {
    await q.createTable(
      new Table({
        name: "webhook_endpoints",
        columns: [
          seq(),
          str("id", 40),
          str("account_id", 40),
          str("mode", 8),
          str("url", 2048),
          /** JSON array of event types, or ["*"]; the fan-out matches `"type"` in it. */
          { name: "events", type: "text" },
          str("description", 500, true),
          /** whsec_…: needed in clear to sign (HMAC); never returned after creation. */
          str("secret", 100),
          /** enabled | disabled. */
          str("status", 16),
          ms("created_at"),
          ms("updated_at"),
        ],
        indices: [
          new TableIndex({ name: "uq_webhook_endpoints_id", columnNames: ["id"], isUnique: true }),
          // The fan-out's one read per event (an account without endpoints: an empty range), and lists.
          new TableIndex({ name: "ix_webhook_endpoints_account", columnNames: ["account_id", "mode", "status"] }),
          new TableIndex({ name: "ix_webhook_endpoints_list", columnNames: ["account_id", "mode", "seq"] }),
        ],
      }),
    );
    await q.createTable(
      new Table({
        name: "webhook_deliveries",
        columns: [
          seq(),
          str("id", 40),
          str("endpoint_id", 40),
          str("account_id", 40),
          str("mode", 8),
          str("event_id", 40),
          str("event_type", 64),
          /** pending | succeeded | failed. */
          str("status", 16),
          { name: "attempts", type: "integer" },
          /** When the next attempt is due; while an attempt runs, when its lease ends. Null when final. */
          ms("next_attempt_at", true),
          /** Set by a manual retry: its one attempt, no automatic retries after it. Null: the automatic schedule. */
          ms("retry_until", true),
          /** The claim of the attempt in flight: only its holder may record the outcome. */
          str("lease_token", 40, true),
          { name: "last_response_status", type: "integer", isNullable: true },
          str("last_error", 500, true),
          ms("created_at"),
          ms("updated_at"),
        ],
        indices: [
          new TableIndex({ name: "uq_webhook_deliveries_id", columnNames: ["id"], isUnique: true }),
          // The workers' queue: due pending rows in order, the endpoint read from the index.
          new TableIndex({ name: "ix_webhook_deliveries_due", columnNames: ["status", "next_attempt_at", "endpoint_id"] }),
          new TableIndex({ name: "ix_webhook_deliveries_endpoint", columnNames: ["endpoint_id", "seq"] }),
        ],
      }),
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.dropTable("webhook_deliveries");
    await q.dropTable("webhook_endpoints");
  }
}
