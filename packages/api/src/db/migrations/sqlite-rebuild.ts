import type { QueryRunner } from "typeorm";

/**
 * Rebuilds a SQLite table from its own CREATE statement as `edit` changes it: the new table, its
 * rows copied, the old one dropped (with its indexes and triggers), the new one renamed, its
 * indexes and triggers made again from their own statements. For what SQLite cannot ALTER (a
 * table's ROWID, a key's AUTOINCREMENT).
 */
export async function rebuildSqliteTable(q: QueryRunner, table: string, edit: (columns: string) => string): Promise<void> {
  const sql = ((await q.query("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", [table])) as { sql: string }[])[0]!.sql;
  const others: { sql: string }[] = await q.query(
    "SELECT sql FROM sqlite_master WHERE type IN ('index', 'trigger') AND tbl_name = ? AND sql IS NOT NULL ORDER BY type",
    [table],
  );
  await q.query(`CREATE TABLE "${table}_rebuilt"${edit(sql.replace(/^CREATE TABLE "[^"]+"/, ""))}`);
  await q.query(`INSERT INTO "${table}_rebuilt" SELECT * FROM "${table}"`);
  await q.query(`DROP TABLE "${table}"`);
  await q.query(`ALTER TABLE "${table}_rebuilt" RENAME TO "${table}"`);
  for (const other of others) await q.query(other.sql);
}
