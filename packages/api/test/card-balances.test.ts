import mysql from "mysql2/promise";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DataSource } from "typeorm";
import { createDataSource, migrate } from "../src/db/datasource.js";

const ROOT = process.env.TEST_DATABASE_URL?.startsWith("mysql") ? process.env.TEST_DATABASE_URL.replace(/\/[^/]*$/, "/") : null;

type Totals = Record<string, { held: number; open: number }>;

/** Per account and mode, the non-zero totals of rows of (account_id, mode, held, open). */
function totals(rows: { account_id: string; mode: string; held: string | number; open: string | number }[]): Totals {
  const out: Totals = {};
  for (const r of rows) if (Number(r.held) !== 0 || Number(r.open) !== 0) out[`${r.account_id}/${r.mode}`] = { held: Number(r.held), open: Number(r.open) };
  return out;
}

/** The triggers' counters, summed over the slots, equal the sums recomputed from the cards; returns them. */
async function expectCountersMatchCards(ds: DataSource): Promise<Totals> {
  const counters = totals(await ds.query("SELECT account_id, mode, SUM(held_cents) AS held, SUM(open_cards) AS open FROM card_balances GROUP BY account_id, mode"));
  const recomputed = totals(
    await ds.query(
      `SELECT account_id, mode, SUM(CASE WHEN hold_status = 'OPEN' THEN amount_cents ELSE 0 END) AS held,
         SUM(CASE WHEN status = 'OPEN' THEN 1 ELSE 0 END) AS open FROM cards GROUP BY account_id, mode`,
    ),
  );
  expect(counters).toEqual(recomputed);
  return counters;
}

/** The same cases on a freshly migrated database of each kind. */
function cardBalanceCases(open: () => Promise<DataSource>) {
  let ds: DataSource;
  let n = 0;
  beforeAll(async () => {
    ds = await open();
    await migrate(ds);
  });
  afterAll(() => ds?.destroy());

  const account = () => `acct_${Date.now().toString(36)}_${++n}`;
  const insert = async (accountId: string, mode: string, status: string, hold: string, amount: number) => {
    const id = `card_${++n}`;
    await ds.query(
      "INSERT INTO cards (id, account_id, mode, status, amount_cents, remaining_cents, spent_cents, hold_status, created_at) VALUES (?, ?, ?, ?, ?, ?, 0, ?, 0)",
      [id, accountId, mode, status, amount, amount, hold],
    );
    return id;
  };
  const set = (id: string, changes: string) => ds.query(`UPDATE cards SET ${changes} WHERE id = ?`, [id]);

  it("keeps the counters equal to the cards through every transition", async () => {
    const [a, b] = [account(), account()];
    // Issuance: CREATING with a PENDING hold counts nothing until the card and hold are OPEN.
    const issued = await insert(a, "test", "CREATING", "PENDING", 1000);
    await expectCountersMatchCards(ds);
    await set(issued, "status = 'OPEN', hold_status = 'OPEN'");
    const opened = await insert(a, "test", "OPEN", "OPEN", 2500);
    const live = await insert(a, "live", "OPEN", "OPEN", 700);
    const other = await insert(b, "test", "OPEN", "OPEN", 400);
    expect((await expectCountersMatchCards(ds))[`${a}/test`]).toEqual({ held: 3500, open: 2 });

    const steps: (() => Promise<unknown>)[] = [
      () => set(issued, "amount_cents = 800"), // an authorization changed the amount under the open hold
      () => set(issued, "lease_until = 5"), // a column the counters do not follow
      () => set(issued, "status = 'USED', hold_status = 'CAPTURED', used_at = 1"), // captured
      () => set(issued, "amount_cents = 600"), // captured: its amount no longer holds anything
      () => set(opened, "status = 'CLOSED'"), // closed, the hold not yet released
      () => set(opened, "hold_status = 'RELEASED'"), // released
      () => set(live, "hold_status = 'EXPIRED'"), // the hold lapsed, the card still open
      // Moved by hand to another mode or account (the API never does), alone or with a transition.
      () => insert(a, "test", "OPEN", "OPEN", 50).then((id) => set(id, "mode = 'live'").then(() => set(id, "account_id = '" + b + "', status = 'CLOSED'"))),
      () => insert(b, "live", "CREATING", "PENDING", 900).then((id) => set(id, "status = 'FAILED', hold_status = 'RELEASED'")),
      () => ds.query("DELETE FROM cards WHERE id = ?", [other]), // an open card deleted
      () => ds.query("DELETE FROM cards WHERE id = ?", [opened]), // a closed card deleted
      // An operator's SQL over many rows at once.
      () => Promise.all([insert(b, "test", "OPEN", "OPEN", 100), insert(b, "test", "OPEN", "OPEN", 200), insert(b, "test", "CLOSED", "OPEN", 300)]),
      () => ds.query("UPDATE cards SET status = 'CLOSED' WHERE account_id = ? AND status = 'OPEN'", [b]),
      () => ds.query("UPDATE cards SET amount_cents = amount_cents + 1 WHERE account_id = ?", [b]),
      () => ds.query("DELETE FROM cards WHERE account_id = ?", [b]),
    ];
    for (const step of steps) {
      await step();
      await expectCountersMatchCards(ds);
    }
    const final = await expectCountersMatchCards(ds);
    expect(final[`${a}/live`]).toEqual({ held: 0, open: 1 });
    expect(final[`${b}/test`]).toBeUndefined();
  });

  // On MariaDB this also shows the AFTER INSERT trigger sees the card's auto-increment seq.
  it("spreads an account's cards over 16 slots by seq, and stays right under concurrent transitions", async () => {
    const a = account();
    const ids = await Promise.all(Array.from({ length: 40 }, (_, i) => insert(a, "test", "OPEN", "OPEN", 100 + i)));
    const seqs: { seq: number }[] = await ds.query("SELECT seq FROM cards WHERE account_id = ?", [a]);
    const slots: { slot: number }[] = await ds.query("SELECT slot FROM card_balances WHERE account_id = ? ORDER BY slot", [a]);
    expect(slots.map((s) => Number(s.slot))).toEqual([...new Set(seqs.map((s) => Number(s.seq) % 16))].sort((x, y) => x - y));
    expect(slots.length).toBeLessThanOrEqual(16);
    await Promise.all(ids.map((id, i) => set(id, i % 2 ? "status = 'USED', hold_status = 'CAPTURED'" : "status = 'CLOSED', hold_status = 'RELEASED'")));
    expect((await expectCountersMatchCards(ds))[`${a}/test`]).toBeUndefined();
  });

  it("backfills the counters from the cards that existed before the migration", async () => {
    // Back to before card_balances (undoing the migrations after it first).
    const undo = { transaction: ds.options.type === "mysql" ? ("none" as const) : ("all" as const) };
    while ((await ds.query("SELECT name FROM migrations ORDER BY timestamp DESC LIMIT 1"))[0].name !== "CardBalances1733900000000") await ds.undoLastMigration(undo);
    await ds.undoLastMigration(undo);
    const [a, b] = [account(), account()];
    const held = await insert(a, "test", "OPEN", "OPEN", 1200);
    await insert(a, "test", "CLOSED", "OPEN", 300);
    await insert(a, "test", "USED", "CAPTURED", 5000);
    await insert(a, "live", "OPEN", "EXPIRED", 40);
    await insert(b, "test", "FAILED", "RELEASED", 90);
    await migrate(ds);

    const counters = await expectCountersMatchCards(ds);
    expect(counters[`${a}/test`]).toEqual({ held: 1500, open: 1 });
    expect(counters[`${a}/live`]).toEqual({ held: 0, open: 1 });
    const backfilled: { slot: number }[] = await ds.query("SELECT slot FROM card_balances WHERE account_id IN (?, ?)", [a, b]);
    expect(backfilled.map((r) => Number(r.slot))).toEqual([0, 0]);
    // A backfilled card's later transition lands in its own slot: only the sum is meaningful.
    await set(held, "status = 'CLOSED', hold_status = 'RELEASED'");
    expect((await expectCountersMatchCards(ds))[`${a}/test`]).toEqual({ held: 300, open: 0 });
  });
}

describe("card_balances counters (SQLite)", () => {
  cardBalanceCases(async () => createDataSource("sqlite::memory:").initialize());
});

describe.runIf(ROOT)("card_balances counters (MariaDB)", () => {
  const name = `cardctl_t_balances_${Date.now().toString(36)}`;
  beforeAll(async () => {
    const admin = await mysql.createConnection(ROOT!);
    await admin.query(`CREATE DATABASE \`${name}\``);
    await admin.end();
  });
  afterAll(async () => {
    const admin = await mysql.createConnection(ROOT!);
    await admin.query(`DROP DATABASE IF EXISTS \`${name}\``);
    await admin.end();
  });

  cardBalanceCases(async () => createDataSource(ROOT + name).initialize());

  it("compares account ids and modes in card_balances as in cards (binary collation)", async () => {
    const admin = await mysql.createConnection(ROOT!);
    try {
      const [rows] = await admin.query(
        "SELECT TABLE_NAME AS t, COLUMN_NAME AS c, COLUMN_TYPE AS type, COLLATION_NAME AS collation FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME IN ('cards', 'card_balances') AND COLUMN_NAME IN ('account_id', 'mode')",
        [name],
      );
      const of = (t: string, c: string) => (rows as { t: string; c: string; type: string; collation: string }[]).find((r) => r.t === t && r.c === c);
      for (const c of ["account_id", "mode"]) {
        expect(of("card_balances", c)).toMatchObject({ type: of("cards", c)!.type, collation: of("cards", c)!.collation });
        expect(of("cards", c)!.collation).toMatch(/_bin$/);
      }
    } finally {
      await admin.end();
    }
  });
});
