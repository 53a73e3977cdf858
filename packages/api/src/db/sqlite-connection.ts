import type { DataSource } from "typeorm";

/** A prepared statement of better-sqlite3, the members the server uses. */
export interface SqliteStatement {
  /** True for a statement that returns rows. */
  readonly reader: boolean;
  get(...params: unknown[]): unknown;
  all(...params: unknown[]): Record<string, unknown>[];
  run(...params: unknown[]): { changes: number; lastInsertRowid: number | bigint };
}

/** better-sqlite3's connection (its `Database`), the members the server uses; the package ships no types. */
export interface SqliteConnection {
  prepare(sql: string): SqliteStatement;
  exec(sql: string): unknown;
  pragma(source: string, options?: { simple: boolean }): unknown;
  transaction<R>(fn: () => R): (() => R) & { immediate(): R };
  readonly inTransaction: boolean;
  /** The file's path. */
  readonly name: string;
  readonly memory: boolean;
}

/** The connection TypeORM's better-sqlite3 driver holds (undefined for another driver, or before it connects). */
export const sqliteConnectionOf = (ds: DataSource): SqliteConnection | undefined =>
  (ds.driver as unknown as { databaseConnection?: SqliteConnection }).databaseConnection;
