import { Table, TableIndex, type MigrationInterface, type QueryRunner, type TableColumnOptions } from "typeorm";

const str = (name: string, length: number, isNullable = false): TableColumnOptions => ({ name, type: "varchar", length: String(length), isNullable });

/**
 * The event outbox (DESIGN 3.7): every state change writes its event in the same transaction.
 * `seq` orders them (lists newest first, live streams by cursor); events are purged after 30 days.
 */
export class Events1733400000000 implements MigrationInterface {
  name = "Events1733400000000";

  async up(q: QueryRunner): Promise<void> {
    await q.createTable(
      new Table({
        name: "events",
        columns: [
          { name: "seq", type: "integer", isPrimary: true, isGenerated: true, generationStrategy: "increment" },
          str("id", 40),
          str("account_id", 40),
          str("mode", 8),
          str("type", 64),
          /** api_key, owner, processor or system; actor_id names the key or owner. */
          str("actor_type", 16),
          str("actor_id", 40, true),
          { name: "data", type: "text" },
          { name: "created_at", type: "bigint" },
        ],
        indices: [
          new TableIndex({ name: "uq_events_id", columnNames: ["id"], isUnique: true }),
          // Newest first per account and mode, and the live streams' cursor walk.
          new TableIndex({ name: "ix_events_list", columnNames: ["account_id", "mode", "seq"] }),
          new TableIndex({ name: "ix_events_type", columnNames: ["account_id", "mode", "type", "seq"] }),
          // The maintenance pass's purge of events older than 30 days.
          new TableIndex({ name: "ix_events_created", columnNames: ["created_at"] }),
        ],
      }),
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.dropTable("events");
  }
}
