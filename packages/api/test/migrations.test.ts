import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createDataSource, migrate } from "../src/db/datasource.js";
import { PARTIAL_CARD_INDEXES } from "../src/db/migrations/1732700000000-partial-indexes.js";
import { CARD_FOLLOW_UP } from "../src/db/migrations/1734200000000-card-sweep-indexes.js";
import { WITHOUT_ROWID_TABLES } from "../src/db/migrations/1734400000000-without-rowid.js";
import { DUE_FOR_RECOVERY } from "../src/domain/cards.js";

describe("migrations (SQLite)", () => {
  const dir = mkdtempSync(join(tmpdir(), "cardctl-migrations-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  // TypeORM's addColumn rebuilds the table and drops index conditions: a later migration that uses it would undo these.
  it("leaves the partial indexes partial after every migration", async () => {
    const ds = createDataSource(`sqlite:${join(dir, "db.sqlite")}`);
    await ds.initialize();
    try {
      await migrate(ds);
      const rows: { name: string; sql: string }[] = await ds.query("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'cards'");
      const sqlOf = new Map(rows.map((r) => [r.name, r.sql]));
      for (const [name, , , where] of PARTIAL_CARD_INDEXES) expect(sqlOf.get(name), name).toContain(`WHERE ${where}`);
      expect(sqlOf.get("ix_cards_expiry")).toContain("WHERE revoked_at IS NULL");
      expect(sqlOf.get("ix_cards_follow_up")).toContain(`WHERE ${CARD_FOLLOW_UP}`);
      // The sweeps' queries, as CardService and LifecycleService send them, read these partial indexes.
      const planOf = async (sql: string, params: unknown[]) =>
        ((await ds.query(`EXPLAIN QUERY PLAN ${sql}`, params)) as { detail: string }[]).map((p) => p.detail).join();
      const followUp = `SELECT * FROM cards WHERE (${CARD_FOLLOW_UP})`;
      expect(await planOf(`${followUp} AND ${DUE_FOR_RECOVERY} ORDER BY recovery_next_at ASC, seq ASC LIMIT 100`, [1])).toContain("ix_cards_follow_up");
      const attention = `SELECT * FROM cards INDEXED BY ix_cards_follow_up WHERE (${CARD_FOLLOW_UP}) AND needs_attention = 1 AND account_id = ? ORDER BY seq DESC LIMIT 100`;
      expect(await planOf(attention, ["acct_x"])).toContain("ix_cards_follow_up");
      expect(await planOf(`SELECT * FROM cards WHERE status = ? AND revoked_at IS NULL AND expires_at < ? LIMIT 100`, ["OPEN", 1])).toContain("ix_cards_expiry");
      expect(await planOf(`SELECT * FROM cards WHERE status = 'USED' AND revoked_at IS NULL AND expires_at <= ? AND ${DUE_FOR_RECOVERY} LIMIT 100`, [1, 1])).toContain("ix_cards_expiry");
      // The claim's UPDATE … WHERE id IN (…) AND status = 'pending' must take the id's index, not read every pending row.
      const [pending] = await ds.query("SELECT sql FROM sqlite_master WHERE name = 'ix_webhook_deliveries_pending'");
      expect(pending.sql).toContain("WHERE status = 'pending'");
      const plan: { detail: string }[] = await ds.query(
        "EXPLAIN QUERY PLAN UPDATE webhook_deliveries SET lease_token = 't' WHERE id IN ('a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', 'k', 'l') AND status = 'pending' AND next_attempt_at <= 1",
      );
      expect(plan.map((p) => p.detail).join()).toContain("uq_webhook_deliveries_id");
      // Writing the deliveries of a batch of fan-outs: each fan-out by its key, its event by id, its account's endpoints by their index.
      const expansion = await planOf(
        "SELECT e.id, w.id FROM webhook_fan_outs f JOIN events e ON e.id = f.event_id JOIN webhook_endpoints w ON w.account_id = e.account_id AND w.mode = e.mode " +
          "AND INSTR(',' || f.endpoint_ids || ',', ',' || w.id || ',') > 0 WHERE f.event_id IN ('a', 'b', 'c') AND f.lease_token = ?",
        ["t"],
      );
      expect(expansion).toMatch(/SEARCH f USING INDEX sqlite_autoindex_webhook_fan_outs_1.*SEARCH e USING INDEX uq_events_id.*SEARCH w USING INDEX ix_webhook_endpoints_account/);
    } finally {
      await ds.destroy();
    }
  });

  it("stores the rows every card creation writes by their key (WITHOUT ROWID), keeping rows and indexes through the rebuild and its undo", async () => {
    const ds = createDataSource(`sqlite:${join(dir, "rowid.sqlite")}`);
    await ds.initialize();
    try {
      const tableSql = async (t: string): Promise<string> => (await ds.query("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", [t]))[0].sql;
      const indexesOf = async (t: string): Promise<string[]> =>
        ((await ds.query("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ? ORDER BY name", [t])) as { name: string }[]).map((r) => r.name);
      await migrate(ds);
      await ds.undoLastMigration({ transaction: "all" });
      for (const t of WITHOUT_ROWID_TABLES) expect(await tableSql(t), t).not.toContain("WITHOUT ROWID");
      expect(await indexesOf("sim_holds")).toEqual(["sqlite_autoindex_sim_holds_1", "uq_sim_holds_key"]);
      await ds.query("INSERT INTO idempotency_keys VALUES ('key_1', 'k', 'h', 'DONE', 201, '{\"id\":\"card_1\"}', 0, 1, 2)");
      await ds.query("INSERT INTO sim_holds VALUES ('pi_sim_1', 'hold-key', 'test', 'pm_card_visa', 500, 0, 'requires_capture', 1)");
      await ds.query("INSERT INTO sim_cards VALUES ('ic_1', 'card-key', 'test', '4242424242424242', '123', 12, 2030, 500, 'active', 'card_1', 1)");

      await migrate(ds);
      for (const t of WITHOUT_ROWID_TABLES) expect(await tableSql(t), t).toMatch(/^CREATE TABLE "\w+" \(.*\) WITHOUT ROWID$/);
      expect(await indexesOf("idempotency_keys")).toEqual(["ix_idempotency_expiry"]);
      expect(await indexesOf("sim_holds")).toEqual(["uq_sim_holds_key"]);
      expect(await indexesOf("sim_cards")).toEqual(["uq_sim_cards_key"]);
      expect(await ds.query("SELECT response_body FROM idempotency_keys WHERE api_key_id = 'key_1' AND idem_key = 'k'")).toEqual([{ response_body: '{"id":"card_1"}' }]);
      expect(await ds.query("SELECT id, amount_cents FROM sim_holds")).toEqual([{ id: "pi_sim_1", amount_cents: 500 }]);
      expect(await ds.query("SELECT id, card_ref FROM sim_cards")).toEqual([{ id: "ic_1", card_ref: "card_1" }]);
      // Keys stay unique: the primary key, and the processor's idempotency keys.
      await expect(ds.query("INSERT INTO idempotency_keys VALUES ('key_1', 'k', 'h2', 'RUNNING', NULL, NULL, 0, 1, 2)")).rejects.toThrow(/UNIQUE/);
      await expect(ds.query("INSERT INTO sim_holds VALUES ('pi_sim_2', 'hold-key', 'test', 'pm_card_visa', 500, 0, 'requires_capture', 1)")).rejects.toThrow(/UNIQUE/);
      await expect(ds.query("INSERT INTO sim_cards VALUES ('ic_1', 'card-key-2', 'test', '4242424242424242', '123', 12, 2030, 500, 'active', 'card_2', 1)")).rejects.toThrow(/UNIQUE/);
    } finally {
      await ds.destroy();
    }
  });
});
