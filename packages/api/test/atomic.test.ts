import mysql from "mysql2/promise";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DataSource } from "typeorm";
import { createDataSource } from "../src/db/datasource.js";
import { runAtomically, runSql } from "../src/db/fast.js";

const ROOT = process.env.TEST_DATABASE_URL?.startsWith("mysql") ? process.env.TEST_DATABASE_URL.replace(/\/[^/]*$/, "/") : null;

/** runAtomically: all statements or none, on the database the suite runs on. */
describe(`atomic statement groups (${ROOT ? "mysql" : "sqlite"})`, () => {
  const name = `cardctl_t_atomic_${Date.now().toString(36)}`;
  let ds: DataSource;
  const values = async () => (await runSql(ds, "SELECT id, v FROM t ORDER BY id", [])).records.map((r) => Number(r.v));

  beforeAll(async () => {
    if (ROOT) {
      const admin = await mysql.createConnection(ROOT);
      await admin.query(`CREATE DATABASE \`${name}\``);
      await admin.end();
    }
    ds = createDataSource(ROOT ? ROOT + name : "sqlite::memory:");
    await ds.initialize();
    await ds.query("CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL)");
    await ds.query("INSERT INTO t VALUES (1, 0), (2, 0)");
  });
  afterAll(async () => {
    await ds?.destroy();
    if (ROOT) {
      const admin = await mysql.createConnection(ROOT);
      await admin.query(`DROP DATABASE IF EXISTS \`${name}\``);
      await admin.end();
    }
  });

  it("commits every statement when each changes the rows it expects", async () => {
    const res = await runAtomically(ds, [
      { sql: "UPDATE t SET v = 1 WHERE id = 1 AND v = 0", params: [], expect: 1 },
      { sql: "INSERT INTO t VALUES (?, ?)", params: [3, 7] },
    ]);
    expect(res?.map((r) => r.affected)).toEqual([1, 1]);
    expect(await values()).toEqual([1, 0, 7]);
  });

  it("rolls every statement back when a conditional one misses", async () => {
    const res = await runAtomically(ds, [
      { sql: "UPDATE t SET v = 5 WHERE id = 2", params: [] },
      { sql: "UPDATE t SET v = 9 WHERE id = 1 AND v = 0", params: [], expect: 1 },
    ]);
    expect(res).toBeNull();
    expect(await values()).toEqual([1, 0, 7]);
  });

  it("rolls every statement back when one fails, and passes the error on", async () => {
    await expect(
      runAtomically(ds, [
        { sql: "UPDATE t SET v = 5 WHERE id = 2", params: [] },
        { sql: "INSERT INTO t VALUES (?, ?)", params: [1, 1] },
      ]),
    ).rejects.toThrow();
    expect(await values()).toEqual([1, 0, 7]);
  });

  it("undoes a failing lone statement alone, all of its rows, beside others committed with it", async () => {
    // Same turn of the event loop: on SQLite one group commit, where a lone statement has no savepoint.
    const [bad, good, atomic] = await Promise.allSettled([
      runSql(ds, "INSERT INTO t VALUES (10, 1), (1, 1)", []),
      runSql(ds, "INSERT INTO t VALUES (11, 2)", []),
      runAtomically(ds, [{ sql: "INSERT INTO t VALUES (12, 3)", params: [] }]),
    ]);
    expect(bad.status).toBe("rejected");
    expect([good.status, atomic.status]).toEqual(["fulfilled", "fulfilled"]);
    expect(await values()).toEqual([1, 0, 7, 2, 3]);
    await runSql(ds, "DELETE FROM t WHERE id > 10", []);
  });

  it("undoes a group that failed after writing alone, beside others committed with it", async () => {
    // Same turn of the event loop: on SQLite one group commit, run again with savepoints once a group failed after writing.
    const [failed, missed, lone, group] = await Promise.allSettled([
      runAtomically(ds, [
        { sql: "UPDATE t SET v = 5 WHERE id = 2", params: [] },
        { sql: "INSERT INTO t VALUES (?, ?)", params: [1, 1] },
      ]),
      runAtomically(ds, [
        { sql: "INSERT INTO t VALUES (?, ?)", params: [13, 6] },
        { sql: "UPDATE t SET v = 9 WHERE id = 1 AND v = 0", params: [], expect: 1 },
      ]),
      runSql(ds, "INSERT INTO t VALUES (11, 2)", []),
      runAtomically(ds, [
        { sql: "UPDATE t SET v = v + 1 WHERE id = 3 AND v = 7", params: [], expect: 1 },
        { sql: "INSERT INTO t VALUES (?, ?)", params: [12, 3] },
      ]),
    ]);
    expect(failed.status).toBe("rejected");
    expect(missed).toEqual({ status: "fulfilled", value: null });
    expect([lone.status, group.status]).toEqual(["fulfilled", "fulfilled"]);
    expect(await values()).toEqual([1, 0, 8, 2, 3]);
    await runSql(ds, "DELETE FROM t WHERE id > 10", []);
    await runSql(ds, "UPDATE t SET v = 7 WHERE id = 3", []);
  });

  it("rolls back a lone conditional statement that changed more rows than expected", async () => {
    const res = await runAtomically(ds, [{ sql: "UPDATE t SET v = v + 100 WHERE id IN (1, 2)", params: [], expect: 1 }]);
    expect(res).toBeNull();
    expect(await values()).toEqual([1, 0, 7]);
  });

  it("keeps other statements out of an open group (many groups and single statements at once)", async () => {
    await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        i % 2
          ? runAtomically(ds, [
              { sql: "UPDATE t SET v = v + 1 WHERE id = 1", params: [] },
              { sql: "UPDATE t SET v = v - 1 WHERE id = 2", params: [] },
            ])
          : runSql(ds, "UPDATE t SET v = v + 0 WHERE id = 3", []),
      ),
    );
    const [a, b] = await values();
    expect(a! + b!).toBe(1);
  });
});
