import mysql from "mysql2/promise";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DataSource } from "typeorm";
import { createDataSource } from "../src/db/datasource.js";
import { runAtomically, runSql, type SqlResult } from "../src/db/fast.js";

const ROOT = process.env.TEST_DATABASE_URL?.startsWith("mysql") ? process.env.TEST_DATABASE_URL.replace(/\/[^/]*$/, "/") : null;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The retry of DESIGN's conditional updates when InnoDB picks one as a deadlock victim. MariaDB only. */
describe.runIf(ROOT)("InnoDB deadlocks (MariaDB)", () => {
  const name = `cardctl_t_deadlock_${Date.now().toString(36)}`;
  let ds: DataSource;
  let other: mysql.Connection;

  beforeAll(async () => {
    const admin = await mysql.createConnection(ROOT!);
    await admin.query(`CREATE DATABASE \`${name}\``);
    await admin.end();
    ds = createDataSource(ROOT + name);
    await ds.initialize();
    other = await mysql.createConnection(ROOT + name);
  });
  afterAll(async () => {
    await other?.end();
    await ds?.destroy();
    const admin = await mysql.createConnection(ROOT!);
    await admin.query(`DROP DATABASE IF EXISTS \`${name}\``);
    await admin.end();
  });

  /**
   * A transaction of the other connection holds row 2 and has written many rows; our statement
   * takes row 1 and waits for row 2; the transaction then asks for row 1. InnoDB aborts the
   * lighter side, our single statement, which must run again once the transaction commits.
   */
  async function deadlockAgainst(ours: () => Promise<unknown>): Promise<PromiseSettledResult<unknown>> {
    await ds.query("DROP TABLE IF EXISTS t");
    await ds.query("DROP TABLE IF EXISTS heavy");
    await ds.query("CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB");
    await ds.query("CREATE TABLE heavy (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB");
    await ds.query("INSERT INTO t VALUES (1, 0), (2, 0)");
    await ds.query(`INSERT INTO heavy VALUES ${Array.from({ length: 300 }, (_, i) => `(${i}, 0)`).join(", ")}`);
    await other.query("START TRANSACTION");
    await other.query("UPDATE heavy SET v = v + 1");
    await other.query("UPDATE t SET v = 1 WHERE id = 2");
    const mine = ours().then(
      (value) => ({ status: "fulfilled", value }) as const,
      (reason) => ({ status: "rejected", reason }) as const,
    );
    await sleep(300); // ours now holds row 1 and waits for row 2
    await other.query("UPDATE t SET v = 2 WHERE id = 1");
    await other.query("COMMIT");
    return mine;
  }

  it("runs a single statement again when InnoDB aborts it as the deadlock victim", async () => {
    const outcome = await deadlockAgainst(() => ds.query("UPDATE t SET v = v + 10 WHERE id IN (1, 2)"));
    expect(outcome.status).toBe("fulfilled");
    const rows = await ds.query("SELECT id, v FROM t ORDER BY id");
    expect(rows.map((r: { v: number }) => Number(r.v))).toEqual([12, 11]);
  });

  it("runs a hot-path statement (runSql, straight on mysql2's pool) again too", async () => {
    const outcome = await deadlockAgainst(() => runSql(ds, "UPDATE t SET v = v + 10 WHERE id IN (1, 2)", []));
    expect(outcome.status).toBe("fulfilled");
    expect((outcome as PromiseFulfilledResult<SqlResult>).value.affected).toBe(2);
    const rows = await ds.query("SELECT id, v FROM t ORDER BY id");
    expect(rows.map((r: { v: number }) => Number(r.v))).toEqual([12, 11]);
  });

  it("runs a multi-statement group (runAtomically) again whole when InnoDB aborts it", async () => {
    // Row 1 is taken by the first statement, the second waits for row 2: the group is the victim.
    const outcome = await deadlockAgainst(() =>
      runAtomically(ds, [
        { sql: "UPDATE t SET v = v + 10 WHERE id = 1", params: [] },
        { sql: "UPDATE t SET v = v + 10 WHERE id = 2", params: [] },
      ]),
    );
    expect(outcome.status).toBe("fulfilled");
    const rows = await ds.query("SELECT id, v FROM t ORDER BY id");
    expect(rows.map((r: { v: number }) => Number(r.v))).toEqual([12, 11]);
  });

  it("lets the deadlock stand inside a transaction: the caller's transaction is gone", async () => {
    const outcome = await deadlockAgainst(() => ds.transaction((em) => em.query("UPDATE t SET v = v + 10 WHERE id IN (1, 2)")));
    expect(outcome.status).toBe("rejected");
    expect(String((outcome as PromiseRejectedResult).reason)).toMatch(/Deadlock/);
    const rows = await ds.query("SELECT id, v FROM t ORDER BY id");
    expect(rows.map((r: { v: number }) => Number(r.v))).toEqual([2, 1]);
  });
});
