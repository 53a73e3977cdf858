import { Table, type MigrationInterface, type QueryRunner } from "typeorm";

/** Rows per account and mode that card writes spread over (slot = card seq % SLOTS). */
const BALANCE_SLOTS = 16;

/** What one card adds to its account's counters, from a row reference of a trigger (NEW or OLD). */
const held = (row: string) => `CASE WHEN ${row}.hold_status = 'OPEN' THEN ${row}.amount_cents ELSE 0 END`;
const open = (row: string) => `CASE WHEN ${row}.status = 'OPEN' THEN 1 ELSE 0 END`;

/** One change to one slot: a row reference (NEW or OLD) names the slot, and the deltas to add. */
interface Upsert {
  row: "NEW" | "OLD";
  dHeld: string;
  dOpen: string;
}

/** A trigger on `cards`: when it fires (`when`) and what it adds to which slots. */
interface BalanceTrigger {
  name: string;
  /** MySQL's event; SQLite's may name the columns whose change fires it. */
  event: "INSERT" | "UPDATE" | "DELETE";
  sqliteEvent: string;
  when: string;
  upserts: Upsert[];
}

/** A card's own change: new contribution − old, to its slot, when there is one to make. */
const ownChange = (name: string, event: BalanceTrigger["event"], sqliteEvent: string, change: Upsert): BalanceTrigger => ({
  name,
  event,
  sqliteEvent,
  when: `(${change.dHeld}) <> 0 OR (${change.dOpen}) <> 0`,
  upserts: [change],
});

/**
 * The triggers. The API never moves a card to another account or mode (its seq never changes);
 * a move by hand takes the card's old contribution from the old slot to the new one.
 */
const TRIGGERS: BalanceTrigger[] = [
  ownChange("tr_cards_balance_insert", "INSERT", "INSERT", { row: "NEW", dHeld: held("NEW"), dOpen: open("NEW") }),
  ownChange("tr_cards_balance_update", "UPDATE", "UPDATE OF status, hold_status, amount_cents", {
    row: "NEW",
    dHeld: `${held("NEW")} - ${held("OLD")}`,
    dOpen: `${open("NEW")} - ${open("OLD")}`,
  }),
  ownChange("tr_cards_balance_delete", "DELETE", "DELETE", { row: "OLD", dHeld: `-(${held("OLD")})`, dOpen: `-(${open("OLD")})` }),
  {
    name: "tr_cards_balance_move",
    event: "UPDATE",
    sqliteEvent: "UPDATE OF account_id, mode",
    when: "OLD.account_id <> NEW.account_id OR OLD.mode <> NEW.mode",
    upserts: [
      { row: "OLD", dHeld: `-(${held("OLD")})`, dOpen: `-(${open("OLD")})` },
      { row: "NEW", dHeld: held("OLD"), dOpen: open("OLD") },
    ],
  },
];

const upsertValues = (u: Upsert) =>
  `INSERT INTO card_balances (account_id, mode, slot, held_cents, open_cards)
    VALUES (${u.row}.account_id, ${u.row}.mode, ${u.row}.seq % ${BALANCE_SLOTS}, ${u.dHeld}, ${u.dOpen})`;

const sqliteTrigger = (t: BalanceTrigger) => `CREATE TRIGGER ${t.name} AFTER ${t.sqliteEvent} ON cards
  WHEN ${t.when}
  BEGIN
    ${t.upserts.map((u) => `${upsertValues(u)}
    ON CONFLICT(account_id, mode, slot) DO UPDATE SET held_cents = held_cents + excluded.held_cents, open_cards = open_cards + excluded.open_cards;`).join("\n    ")}
  END`;

// One statement with its BEGIN … END body (no DELIMITER: that is the mysql client's, not the server's).
// The deltas are repeated in the update clause: VALUES(col) there is deprecated on MySQL 8.
const mysqlTrigger = (t: BalanceTrigger) => `CREATE TRIGGER ${t.name} AFTER ${t.event} ON cards FOR EACH ROW
  BEGIN
    IF ${t.when} THEN
      ${t.upserts.map((u) => `${upsertValues(u)}
      ON DUPLICATE KEY UPDATE held_cents = held_cents + (${u.dHeld}), open_cards = open_cards + (${u.dOpen});`).join("\n      ")}
    END IF;
  END`;

/**
 * Per-account counters of the money held and the open cards, for the spend summary (GET
 * /v1/balance): it reads at most BALANCE_SLOTS rows, the same cost at 100 cards or 100,000, where
 * it summed every open card before. The database keeps them with triggers on `cards`, so every
 * writer (the domain, the processors' webhooks, recovery, the maintenance pass, an operator's
 * SQL) keeps them right. Each account has BALANCE_SLOTS rows per mode, picked by the card's seq:
 * concurrent card transitions of one account update different rows instead of queuing on one
 * row lock on MariaDB. Only the sum of an account's slots means anything (one slot may go below 0).
 *
 * SQLite: TypeORM's addColumn, changeColumn and dropColumn rebuild `cards` and lose its triggers,
 * as they lose the partial indexes; later migrations change `cards` with plain ALTER TABLE.
 */
export class CardBalances1733900000000 implements MigrationInterface {
  name = "CardBalances1733900000000";

  async up(q: QueryRunner): Promise<void> {
    const mysql = q.connection.options.type === "mysql";
    await q.createTable(
      new Table({
        name: "card_balances",
        columns: [
          // Types as in `cards`; on MySQL the database's binary collation (1732500000000) applies.
          { name: "account_id", type: "varchar", length: "40", isPrimary: true },
          { name: "mode", type: "varchar", length: "8", isPrimary: true },
          { name: "slot", type: "integer", isPrimary: true },
          { name: "held_cents", type: "bigint", default: 0 },
          { name: "open_cards", type: "integer", default: 0 },
        ],
        withoutRowid: true,
      }),
    );
    if (mysql) {
      // A table made without a collation takes the connection's idea of the database default,
      // which a pooled connection opened before 1732500000000 still holds as the old one: the
      // columns compared with cards' take cards' collation, whatever the connection.
      const [{ collation }] = await q.query(
        "SELECT COLLATION_NAME AS collation FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'cards' AND COLUMN_NAME = 'account_id'",
      );
      await q.query(`ALTER TABLE card_balances CONVERT TO CHARACTER SET utf8mb4 COLLATE ${collation}`);
    }
    // MySQL runs migrations outside a transaction (DDL commits anyway): the lock keeps cards
    // written by running instances from being counted twice (trigger and backfill) or never.
    if (mysql) await q.query("LOCK TABLES cards WRITE, card_balances WRITE");
    try {
      await q.query(
        `INSERT INTO card_balances (account_id, mode, slot, held_cents, open_cards)
         SELECT account_id, mode, 0, SUM(${held("cards")}), SUM(${open("cards")}) FROM cards
         WHERE hold_status = 'OPEN' OR status = 'OPEN' GROUP BY account_id, mode`,
      );
      for (const t of TRIGGERS) await q.query(mysql ? mysqlTrigger(t) : sqliteTrigger(t));
    } finally {
      if (mysql) await q.query("UNLOCK TABLES");
    }
  }

  async down(q: QueryRunner): Promise<void> {
    for (const t of TRIGGERS) await q.query(`DROP TRIGGER IF EXISTS ${t.name}`);
    await q.dropTable("card_balances");
  }
}
