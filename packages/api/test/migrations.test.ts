import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createDataSource, migrate } from "../src/db/datasource.js";
import { PARTIAL_CARD_INDEXES } from "../src/db/migrations/1732700000000-partial-indexes.js";
import { CARD_FOLLOW_UP } from "../src/db/migrations/1734200000000-card-sweep-indexes.js";
import { WITHOUT_ROWID_TABLES } from "../src/db/migrations/1734400000000-without-rowid.js";
import { NO_AUTOINCREMENT_TABLES } from "../src/db/migrations/1734500000000-no-autoincrement.js";
import { LISTED_CARDS } from "../src/db/migrations/1734600000000-listed-cards-index.js";
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
      expect(sqlOf.get("ix_cards_status")).toContain(`WHERE ${LISTED_CARDS}`);
      // The sweeps' queries, as CardService and LifecycleService send them, read these partial indexes.
      const planOf = async (sql: string, params: unknown[]) =>
        ((await ds.query(`EXPLAIN QUERY PLAN ${sql}`, params)) as { detail: string }[]).map((p) => p.detail).join();
      const followUp = `SELECT * FROM cards WHERE (${CARD_FOLLOW_UP})`;
      expect(await planOf(`${followUp} AND ${DUE_FOR_RECOVERY} ORDER BY recovery_next_at ASC, seq ASC LIMIT 100`, [1])).toContain("ix_cards_follow_up");
      const attention = `SELECT * FROM cards INDEXED BY ix_cards_follow_up WHERE (${CARD_FOLLOW_UP}) AND needs_attention = 1 AND account_id = ? ORDER BY seq DESC LIMIT 100`;
      expect(await planOf(attention, ["acct_x"])).toContain("ix_cards_follow_up");
      expect(await planOf(`SELECT * FROM cards WHERE status = ? AND revoked_at IS NULL AND expires_at < ? LIMIT 100`, ["OPEN", 1])).toContain("ix_cards_expiry");
      // A list by status (CardService.list): the statuses' partial index, by an agent's too when the planner chooses.
      const byStatus = `WHERE account_id = ? AND mode = ? AND status = ? AND (${LISTED_CARDS}) ORDER BY seq DESC LIMIT 21`;
      expect(await planOf(`SELECT * FROM cards INDEXED BY ix_cards_status ${byStatus}`, ["acct_x", "test", "OPEN"])).toContain("ix_cards_status");
      expect(await planOf(`SELECT * FROM cards ${byStatus.replace("status = ?", "status = ? AND agent_id = ?")}`, ["acct_x", "test", "OPEN", "a"])).toMatch(/ix_cards_status|ix_cards_agent/);
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

  it("copies each account's current Stripe cardholder into the record of cardholders, as backfilled", async () => {
    const ds = createDataSource(`sqlite:${join(dir, "cardholders.sqlite")}`);
    await ds.initialize();
    try {
      await migrate(ds);
      while ((await ds.query("SELECT name FROM migrations ORDER BY id DESC LIMIT 1"))[0].name !== "StripeCardholders1735000000000")
        await ds.undoLastMigration({ transaction: "all" });
      await ds.undoLastMigration({ transaction: "all" });
      await ds.query("INSERT INTO stripe_accounts (account_id, mode, cardholder_id, updated_at) VALUES ('acct_a', 'live', 'ich_a', 1), ('acct_b', 'test', NULL, 1)");
      const before = Date.now();
      await migrate(ds);
      const rows = await ds.query("SELECT cardholder_id, account_id, mode, created_at, backfilled FROM stripe_cardholders");
      expect(rows).toMatchObject([{ cardholder_id: "ich_a", account_id: "acct_a", mode: "live", backfilled: 1 }]);
      expect(Number(rows[0].created_at)).toBeGreaterThanOrEqual(before);
    } finally {
      await ds.destroy();
    }
  });

  it("rebuilds the tables a card creation writes (WITHOUT ROWID, no AUTOINCREMENT), keeping rows, indexes, triggers and keys through the rebuild and its undo", async () => {
    const ds = createDataSource(`sqlite:${join(dir, "rebuilt.sqlite")}`);
    await ds.initialize();
    try {
      const tables = [...WITHOUT_ROWID_TABLES, ...NO_AUTOINCREMENT_TABLES];
      const tableSql = async (t: string): Promise<string> => (await ds.query("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", [t]))[0].sql;
      const schemaObjects = async (): Promise<string[]> =>
        (
          (await ds.query(
            `SELECT type || ' ' || name AS o FROM sqlite_master WHERE type IN ('index', 'trigger') AND tbl_name IN (${tables.map(() => "?").join(", ")}) ORDER BY o`,
            tables,
          )) as { o: string }[]
        ).map((r) => r.o);
      const balance = async () => (await ds.query("SELECT SUM(held_cents) AS held, SUM(open_cards) AS open FROM card_balances WHERE account_id = 'acct_t'"))[0];
      const insertCard = (seq: number | null, id: string, cents: number) =>
        ds.query(
          "INSERT INTO cards (seq, id, account_id, mode, status, amount_cents, remaining_cents, spent_cents, hold_status, created_at) VALUES (?, ?, 'acct_t', 'test', 'OPEN', ?, ?, 0, 'OPEN', 1)",
          [seq, id, cents, cents],
        );
      const insertEvent = (seq: number | null, id: string) =>
        ds.query("INSERT INTO events (seq, id, account_id, mode, type, actor_type, data, created_at) VALUES (?, ?, 'acct_t', 'test', 'card.created', 'key', '{}', 1)", [seq, id]);

      await migrate(ds);
      const fresh = await schemaObjects();
      expect(fresh).toContain("trigger tr_cards_balance_insert");
      // Back to before the rebuilds (and any migration after them).
      const last = async (): Promise<number> => Number((await ds.query("SELECT timestamp FROM migrations ORDER BY id DESC LIMIT 1"))[0].timestamp);
      while ((await last()) >= 1734400000000) await ds.undoLastMigration({ transaction: "all" });
      for (const t of WITHOUT_ROWID_TABLES) expect(await tableSql(t), t).not.toContain("WITHOUT ROWID");
      for (const t of NO_AUTOINCREMENT_TABLES) expect(await tableSql(t), t).toContain("PRIMARY KEY AUTOINCREMENT");
      expect(await schemaObjects()).toContain("index sqlite_autoindex_sim_holds_1");
      await ds.query("INSERT INTO idempotency_keys VALUES ('key_1', 'k', 'h', 'DONE', 201, '{\"id\":\"card_1\"}', 0, 1, 2)");
      await ds.query("INSERT INTO sim_holds VALUES ('pi_sim_1', 'hold-key', 'test', 'pm_card_visa', 500, 0, 'requires_capture', 1)");
      await ds.query("INSERT INTO sim_cards VALUES ('ic_1', 'card-key', 'test', '4242424242424242', '123', 12, 2030, 500, 'active', 'card_1', 1)");
      await insertCard(7, "card_1", 500);
      await insertEvent(9, "evt_1");
      expect(await balance()).toEqual({ held: 500, open: 1 });

      await migrate(ds);
      expect(await schemaObjects()).toEqual(fresh);
      for (const t of WITHOUT_ROWID_TABLES) expect(await tableSql(t), t).toMatch(/^CREATE TABLE "\w+" \(.*\) WITHOUT ROWID$/);
      for (const t of NO_AUTOINCREMENT_TABLES) expect(await tableSql(t), t).toMatch(/^CREATE TABLE "\w+" \("seq" integer PRIMARY KEY NOT NULL, /);
      expect(await ds.query("SELECT name FROM sqlite_sequence WHERE name IN ('cards', 'events')")).toEqual([]);
      expect(await ds.query("SELECT response_body FROM idempotency_keys WHERE api_key_id = 'key_1' AND idem_key = 'k'")).toEqual([{ response_body: '{"id":"card_1"}' }]);
      expect(await ds.query("SELECT id, amount_cents FROM sim_holds")).toEqual([{ id: "pi_sim_1", amount_cents: 500 }]);
      expect(await ds.query("SELECT id, card_ref FROM sim_cards")).toEqual([{ id: "ic_1", card_ref: "card_1" }]);
      expect(await ds.query("SELECT seq, id FROM cards")).toEqual([{ seq: 7, id: "card_1" }]);
      expect(await ds.query("SELECT seq, id FROM events")).toEqual([{ seq: 9, id: "evt_1" }]);
      // The balance counters neither lost nor counted the copied card again; their triggers came back.
      expect(await balance()).toEqual({ held: 500, open: 1 });
      await insertCard(null, "card_2", 300);
      expect(await balance()).toEqual({ held: 800, open: 2 });
      await ds.query("UPDATE cards SET status = 'CLOSED', hold_status = 'RELEASED' WHERE id = 'card_1'");
      expect(await balance()).toEqual({ held: 300, open: 1 });
      // New rows take the highest key + 1.
      await insertEvent(null, "evt_2");
      expect(await ds.query("SELECT seq FROM cards WHERE id = 'card_2'")).toEqual([{ seq: 8 }]);
      expect(await ds.query("SELECT seq FROM events WHERE id = 'evt_2'")).toEqual([{ seq: 10 }]);
      // Keys stay unique: the primary keys, and the processor's idempotency keys.
      await expect(ds.query("INSERT INTO idempotency_keys VALUES ('key_1', 'k', 'h2', 'RUNNING', NULL, NULL, 0, 1, 2)")).rejects.toThrow(/UNIQUE/);
      await expect(ds.query("INSERT INTO sim_holds VALUES ('pi_sim_2', 'hold-key', 'test', 'pm_card_visa', 500, 0, 'requires_capture', 1)")).rejects.toThrow(/UNIQUE/);
      await expect(ds.query("INSERT INTO sim_cards VALUES ('ic_1', 'card-key-2', 'test', '4242424242424242', '123', 12, 2030, 500, 'active', 'card_2', 1)")).rejects.toThrow(/UNIQUE/);
      await expect(insertCard(null, "card_1", 100)).rejects.toThrow(/UNIQUE/);
    } finally {
      await ds.destroy();
    }
  });
});
