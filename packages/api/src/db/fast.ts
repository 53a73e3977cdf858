import { FindOperator, type DataSource, type FindManyOptions, type FindOptionsWhere, type EntityMetadata, type EntitySchema, type ObjectLiteral, type Repository } from "typeorm";
import type { ColumnMetadata } from "typeorm/metadata/ColumnMetadata.js";
import { retryOnDeadlock } from "./datasource.js";
import { sqliteConnectionOf, type SqliteConnection, type SqliteStatement } from "./sqlite-connection.js";

/**
 * The hot path's repository: the same methods and results as TypeORM's Repository for the simple
 * shapes every request uses (equality, In, IsNull, LessThan, MoreThan on columns; one ORDER BY; a
 * LIMIT), as one cached SQL string per shape run through the data source's own query runner, and
 * rows hydrated with the driver's own per-column conversion (booleans, bigint transformers). Any
 * other shape (relations, select, arrays of conditions, null values, …) goes to TypeORM unchanged.
 * TypeORM builds a query builder, its SQL and its result mapping on every call; on a read that is
 * mostly what the request costs.
 */
export type FastRepository<T extends ObjectLiteral> = Pick<
  Repository<T>,
  "findOneBy" | "find" | "update" | "insert" | "delete" | "findOne" | "createQueryBuilder"
> & {
  /** The statement `insert` runs, for `runAtomically`, of one row or of rows with the same columns; only plain column values. */
  insertStatement(entities: Partial<T> | readonly Partial<T>[]): Statement;
  /** The statement `update` runs, for `runAtomically`; only the simple `where` shapes. */
  updateStatement(criteria: FindOptionsWhere<T>, partial: Partial<T>, expect?: number): Statement;
  /** `find`, read as `read` says (FindRead); with neither, `find` itself. */
  findWith(opts: FindManyOptions<T>, read: FindRead): Promise<T[]>;
  /** TypeORM's `countBy`, told to use `index` as `findWith` is (FindRead.index). */
  countUsingIndex(index: string, where: FindOptionsWhere<T>): Promise<number>;
  /**
   * Rows matching a condition written in SQL, then `tail` (ORDER BY, LIMIT): for a condition a
   * SQLite partial index must see word for word, which `find` would send with parameters. With
   * `partialIndex`, SQLite is told to use that index (without statistics its planner prefers any
   * equality on another index, such as an account's); MySQL/MariaDB have no partial indexes.
   */
  findWhereSql(condition: string, params: unknown[], tail: string, partialIndex?: string): Promise<T[]>;
  /** A row holding every column of the entity by name (a join's `alias.*`, say) as the entity, as `find` makes them. */
  hydrate(row: Record<string, unknown>): T;
};

/** How `findWith` reads rows. */
export interface FindRead {
  /**
   * The index the database is told to use (FORCE INDEX on MySQL/MariaDB, INDEXED BY on SQLite).
   * MariaDB's sampled statistics, and SQLite without statistics, sometimes chose another index of
   * the account and sorted all its rows for one page (0.7 ms on 10,000 cards).
   */
  index?: string;
  /**
   * SQL without parameters added to the where: SQLite uses a partial index only for a query that
   * repeats its condition word for word. Only the shapes `find` runs itself.
   */
  condition?: string;
}

/** `?, ?, ?`: one placeholder per value, for an IN list or a VALUES tuple. */
export const placeholders = (values: readonly unknown[]): string => values.map(() => "?").join(", ");

/**
 * A list that a statement takes as one placeholder (or one condition) per element, such as an IN
 * list, padded to the next power of two by repeating its last element, which changes no result.
 * A statement then has one text per size class instead of one per length: each text is a prepared
 * statement on every pooled MariaDB connection, and the server allows 16,382 in all.
 */
export function padded<T>(values: readonly T[]): T[] {
  return values.length === 0 ? [] : [...values, ...Array<T>(paddedLength(values.length) - values.length).fill(values.at(-1)!)];
}

/** The length `padded` gives a list of `n` elements. */
export function paddedLength(n: number): number {
  let size = 1;
  while (size < n) size *= 2;
  return size;
}

type Where = Record<string, unknown>;
interface Compiled {
  sql: string;
  params: unknown[];
}

/** One statement of an atomic group: if `expect` is set and it changes another number of rows, the group rolls back. */
export interface Statement extends Compiled {
  expect?: number;
}

const cache = new WeakMap<DataSource, Map<unknown, FastRepository<any>>>();

/** A statement's outcome, as TypeORM's structured QueryResult has it. */
export interface SqlResult {
  records: Record<string, unknown>[];
  affected?: number;
  /** MySQL: the OkPacket (insertId); SQLite: the last inserted row id. */
  raw: any;
}

const statements = new WeakMap<DataSource, Map<string, SqliteStatement>>();
const STATEMENT_CACHE = 500;

type MysqlExecutor = { execute(sql: string, params: unknown[], done: (err: Error | null, raw: any) => void): void };

/** One prepared statement on a mysql2 pool or connection, as a SqlResult. */
async function mysqlExecute(on: MysqlExecutor, sql: string, params: unknown[]): Promise<SqlResult> {
  const raw = await new Promise<any>((resolve, reject) => on.execute(sql, params, (err, result) => (err ? reject(err) : resolve(result))));
  return Array.isArray(raw) ? { records: raw, raw } : { records: [], affected: raw.affectedRows, raw };
}

/**
 * One statement, outside any transaction, straight on the driver: TypeORM's query runner wraps
 * each call in a runner, a logger call, query events and several awaits. On SQLite (a synchronous
 * driver) that cost more than the statement, so it runs on better-sqlite3 with prepared statements
 * kept per SQL string; on MySQL it goes to mysql2's pool (the data source's own), retried on an
 * InnoDB deadlock as the runner's statements are. Errors are the driver's own (isUniqueViolation
 * reads either shape).
 */
export async function runSql(ds: DataSource, sql: string, params: unknown[]): Promise<SqlResult> {
  if (ds.options.type === "better-sqlite3") {
    const stmt = prepared(ds, sql);
    return stmt.reader ? execute(stmt, params) : inGroupCommit(ds, () => execute(stmt, params));
  }
  const pool = (ds.driver as unknown as { pool: MysqlExecutor }).pool;
  return retryOnDeadlock(() => mysqlExecute(pool, sql, params));
}

/** A statement prepared once per SQL string and data source. */
function prepared(ds: DataSource, sql: string): SqliteStatement {
  let cached = statements.get(ds);
  if (!cached) statements.set(ds, (cached = new Map()));
  let stmt = cached.get(sql);
  if (!stmt) {
    if (cached.size >= STATEMENT_CACHE) cached.clear();
    cached.set(sql, (stmt = sqliteConnectionOf(ds)!.prepare(sql)));
  }
  return stmt;
}

/** One statement on better-sqlite3, synchronously, with prepared statements kept per SQL string. */
const sqliteRun = (ds: DataSource, sql: string, params: unknown[]): SqlResult => execute(prepared(ds, sql), params);

/** A prepared statement run: a read's rows, or a write's changes and last inserted row id. */
function execute(stmt: SqliteStatement, params: unknown[]): SqlResult {
  if (stmt.reader) return { records: stmt.all(...params), raw: undefined };
  const res = stmt.run(...params);
  return { records: [], affected: res.changes, raw: res.lastInsertRowid };
}

interface Queued {
  work: () => unknown;
  resolve(value: unknown): void;
  reject(err: unknown): void;
}
const queues = new WeakMap<DataSource, Queued[]>();

/**
 * SQLite group commit: the writes that requests ask for during one turn of the event loop commit
 * together in one transaction. Every caller is answered after the commit, so what it was told is
 * durable, as with a commit of its own. A commit in WAL mode writes every page the transaction
 * changed; one card's writes touched ~15 pages per commit in six commits, most of them the same
 * tail pages of the tables and indexes, so batching them cuts the WAL writes (and their system
 * calls) that were most of a create's cost. MySQL needs none of this: InnoDB groups concurrent
 * commits itself.
 *
 * A failing item (a unique violation, a conditional group that missed) fails only its own caller.
 * SQLite undoes a failing statement's own changes and keeps the transaction open, so an item that
 * failed before writing anything needs nothing more. One that failed after some of its statements
 * wrote (`PartlyWritten`) is undone by running the group again, each item in a savepoint of its
 * own. Savepoints are kept for that rare case: each cost 20–35 µs per item (its sub-journal copies
 * every page the item touches; BENCHMARKS.md fixes 40 and 41).
 */
function inGroupCommit<T>(ds: DataSource, work: () => T): Promise<T> {
  let queue = queues.get(ds);
  if (!queue) queues.set(ds, (queue = []));
  const done = new Promise<T>((resolve, reject) => queue.push({ work, resolve: resolve as (v: unknown) => void, reject }));
  if (queue.length === 1) setImmediate(() => commitGroup(ds));
  return done;
}

/** Thrown by a group item that failed after some of its statements wrote: only a rollback undoes them. */
class PartlyWritten extends Error {
  constructor(readonly original: unknown) {
    super("a statement group failed after writing");
  }
}

function commitGroup(ds: DataSource): void {
  const db = sqliteConnectionOf(ds)!;
  // A TypeORM transaction (owner sign-in) is open between two of its awaits: let it end first.
  if (db.inTransaction) return void setImmediate(() => commitGroup(ds));
  const group = queues.get(ds)!;
  queues.set(ds, []);
  let outcomes: Outcome[];
  try {
    // The careful run never gives up (null): it undoes a failing item alone.
    outcomes = commitOnce(db, group, false) ?? commitOnce(db, group, true)!;
  } catch (err) {
    for (const q of group) q.reject(err);
    return;
  }
  group.forEach((q, i) => (outcomes[i]!.ok ? q.resolve(outcomes[i]!.value) : q.reject(outcomes[i]!.value)));
}

type Outcome = { ok: boolean; value: unknown };
const GIVE_UP = Symbol("partly written");

/**
 * One transaction of a group's items, in order: their outcomes, or (`careful` false) null when an
 * item failed after writing, with everything rolled back. `careful` runs each item in a savepoint,
 * which undoes it alone.
 */
function commitOnce(db: SqliteConnection, group: Queued[], careful: boolean): Outcome[] | null {
  const outcomes: Outcome[] = [];
  try {
    db.transaction(() => {
      for (const { work } of group) {
        try {
          outcomes.push({ ok: true, value: careful ? db.transaction(work)() : work() });
        } catch (err) {
          // An error that ended the whole transaction (I/O, disk full) fails the group.
          if (!db.inTransaction) throw err;
          if (!(err instanceof PartlyWritten)) outcomes.push({ ok: false, value: err });
          else if (careful) outcomes.push({ ok: false, value: err.original });
          else throw GIVE_UP;
        }
      }
    }).immediate();
  } catch (err) {
    if (err === GIVE_UP) return null;
    throw err;
  }
  return outcomes;
}

/** The rows of one statement (none for writes), through runSql. */
export async function queryRows(ds: DataSource, sql: string, params: unknown[]): Promise<any[]> {
  return (await runSql(ds, sql, params)).records;
}

/** The auto-increment key an INSERT generated (SQLite: last row id; MySQL: insertId). */
export const insertedId = (res: SqlResult): number => Number(res.raw?.insertId ?? res.raw);

/** Thrown inside a transaction to roll it back when a conditional statement missed. */
class Missed extends Error {}

type MysqlConnection = MysqlExecutor & { query(sql: string, done: (err: Error | null) => void): void; release(): void };

/** Whether a conditional statement (`expect`) changed another number of rows than it expects. */
const missed = (step: Statement, res: SqlResult) => step.expect !== undefined && res.affected !== step.expect;

/**
 * A step of an atomic group on SQLite. A failure after anything may have been written (a later
 * step, or a conditional one that changed too many rows) is PartlyWritten: only a rollback undoes it.
 */
function sqliteStep(ds: DataSource, step: Statement, index: number): SqlResult {
  let res: SqlResult;
  try {
    res = sqliteRun(ds, step.sql, step.params);
  } catch (err) {
    throw index > 0 ? new PartlyWritten(err) : err;
  }
  if (missed(step, res)) throw index > 0 || res.affected! > 0 ? new PartlyWritten(new Missed()) : new Missed();
  return res;
}

/**
 * Runs statements as one transaction: all of them or none. A statement with `expect` that changes
 * another number of rows (a conditional claim that lost) rolls the whole group back: the answer
 * is then null. On SQLite the group runs synchronously in a group commit, so no other request's
 * statement on the shared connection can land inside it; on MySQL it runs on one pooled
 * connection, and the whole group runs again when InnoDB picks it as a deadlock victim.
 */
export async function runAtomically(ds: DataSource, steps: Statement[]): Promise<SqlResult[] | null> {
  try {
    if (ds.options.type === "better-sqlite3")
      return await inGroupCommit(ds, () => steps.map((step, i) => sqliteStep(ds, step, i)));
    const pool = (ds.driver as unknown as { pool: { getConnection(done: (err: Error | null, c: MysqlConnection) => void): void } }).pool;
    return await retryOnDeadlock(async () => {
      const conn = await new Promise<MysqlConnection>((resolve, reject) => pool.getConnection((err, c) => (err ? reject(err) : resolve(c))));
      const query = (sql: string) => new Promise<void>((resolve, reject) => conn.query(sql, (err) => (err ? reject(err) : resolve())));
      try {
        await query("START TRANSACTION");
        const results: SqlResult[] = [];
        for (const step of steps) {
          const res = await mysqlExecute(conn, step.sql, step.params);
          if (missed(step, res)) throw new Missed();
          results.push(res);
        }
        await query("COMMIT");
        return results;
      } catch (err) {
        await query("ROLLBACK").catch(() => undefined);
        throw err;
      } finally {
        conn.release();
      }
    });
  } catch (err) {
    if (err instanceof Missed) return null;
    throw err;
  }
}

export function fastRepository<T extends ObjectLiteral>(ds: DataSource, entity: EntitySchema<T>): FastRepository<T> {
  let perDs = cache.get(ds);
  if (!perDs) cache.set(ds, (perDs = new Map()));
  let fast = perDs.get(entity) as FastRepository<T> | undefined;
  if (!fast) perDs.set(entity, (fast = build(ds, ds.getRepository(entity))));
  return fast;
}

function build<T extends ObjectLiteral>(ds: DataSource, repo: Repository<T>): FastRepository<T> {
  const meta: EntityMetadata = repo.metadata;
  const driver = ds.driver;
  const q = (name: string) => driver.escape(name);
  const table = q(meta.tableName);
  const columns = new Map<string, ColumnMetadata>(meta.columns.map((c) => [c.propertyName, c]));
  /** Quoted column names by property, escaped once. */
  const quoted = new Map<string, string>(meta.columns.map((c) => [c.propertyName, q(c.databaseName)]));
  const selectList = meta.columns.map((c) => q(c.databaseName)).join(", ");
  const increment = meta.columns.find((c) => c.isGenerated && c.generationStrategy === "increment");

  /** `WHERE …` and its parameters, or null when the shape is not one we mirror exactly. */
  const where = (w: unknown): Compiled | null => {
    if (!w || typeof w !== "object" || Array.isArray(w)) return null;
    const parts: string[] = [];
    const params: unknown[] = [];
    for (const [prop, value] of Object.entries(w as Where)) {
      const col = columns.get(prop);
      if (value === undefined) continue; // TypeORM skips undefined conditions too
      if (!col || value === null) return null;
      const name = quoted.get(prop)!;
      if (value instanceof FindOperator) {
        const v = value.value;
        if (value.type === "isNull") parts.push(`${name} IS NULL`);
        else if (value.type === "in" && Array.isArray(v) && v.length > 0 && v.every(scalar)) {
          const list = padded(v);
          parts.push(`${name} IN (${placeholders(list)})`);
          params.push(...list);
        } else if ((value.type === "lessThan" || value.type === "moreThan") && scalar(v)) {
          parts.push(`${name} ${value.type === "lessThan" ? "<" : ">"} ?`);
          params.push(v);
        } else return null;
      } else if (scalar(value)) {
        parts.push(`${name} = ?`);
        params.push(value);
      } else return null;
    }
    if (parts.length === 0) return null;
    return { sql: ` WHERE ${parts.join(" AND ")}`, params };
  };

  const run = (sql: string, params: unknown[]) => runSql(ds, sql, params);

  const hydrate = compileHydrator<T>(meta, driver);

  const select = async (w: Compiled, tail: string, from = table): Promise<T[]> => {
    const res = await run(`SELECT ${selectList} FROM ${from}${w.sql}${tail}`, w.params);
    return (res.records as Record<string, unknown>[]).map(hydrate);
  };

  /** `ORDER BY …` for `{col: "ASC" | "DESC"}`, or null. */
  const orderBy = (order: unknown): string | null => {
    if (order === undefined) return "";
    if (!order || typeof order !== "object") return null;
    const parts: string[] = [];
    for (const [prop, dir] of Object.entries(order as Record<string, unknown>)) {
      const col = columns.get(prop);
      if (!col || (dir !== "ASC" && dir !== "DESC")) return null;
      parts.push(`${quoted.get(prop)!} ${dir}`);
    }
    return parts.length ? ` ORDER BY ${parts.join(", ")}` : "";
  };

  const persistent = (prop: string, value: unknown): unknown => driver.preparePersistentValue(value, columns.get(prop)!);

  const find = async (opts: FindManyOptions<T> | undefined, from: string, condition?: string): Promise<T[]> => {
    const keys = Object.keys(opts ?? {});
    const c = keys.every((k) => k === "where" || k === "order" || k === "take") ? where(opts?.where) : null;
    const order = c ? orderBy(opts?.order) : null;
    const take = opts?.take;
    if (!c || order === null || (take !== undefined && !(Number.isInteger(take) && take > 0))) {
      if (condition) throw new Error(`${meta.name}: a find with a condition takes the shapes find runs itself only`);
      return repo.find(opts);
    }
    const filter = condition ? { sql: `${c.sql} AND (${condition})`, params: c.params } : c;
    return select(filter, `${order}${take !== undefined ? ` LIMIT ${take}` : ""}`, from);
  };

  /** The table with an index hint: FORCE INDEX on MySQL/MariaDB, INDEXED BY on SQLite. */
  const usingIndex = (index: string) =>
    `${table} ${driver.options.type === "mysql" ? `FORCE INDEX (${q(index)})` : `INDEXED BY ${q(index)}`}`;

  const count = async (w: FindOptionsWhere<T> | FindOptionsWhere<T>[], from: string): Promise<number> => {
    const c = where(w);
    if (!c) return repo.countBy(w);
    const res = await run(`SELECT COUNT(1) AS ${q("cnt")} FROM ${from}${c.sql}`, c.params);
    return Number((res.records as { cnt: unknown }[])[0]?.cnt ?? 0);
  };

  /** `UPDATE … SET … WHERE …`, or null for a shape TypeORM must build. */
  const updateSql = (criteria: unknown, partial: unknown): Compiled | null => {
    const c = where(criteria);
    const sets = Object.entries(partial as Record<string, unknown>).filter(([, v]) => v !== undefined);
    if (!c || sets.length === 0 || sets.some(([k, v]) => !columns.has(k) || !storable(v))) return null;
    return {
      sql: `UPDATE ${table} SET ${sets.map(([k]) => `${quoted.get(k)!} = ?`).join(", ")}${c.sql}`,
      params: [...sets.map(([k, v]) => persistent(k, v)), ...c.params],
    };
  };

  /** `INSERT INTO … VALUES …` of rows with the same columns in the same order, or null for a shape TypeORM must build. */
  const insertSql = (entities: readonly unknown[]): Compiled | null => {
    const rows = entities.map((e) => (e && typeof e === "object" && !Array.isArray(e) ? Object.entries(e).filter(([, v]) => v !== undefined) : null));
    const first = rows[0];
    const alike = (row: [string, unknown][] | null): row is [string, unknown][] =>
      !!row && row.length === first!.length && row.every(([k, v], i) => k === first![i]![0] && columns.has(k) && storable(v));
    if (!first || !rows.every(alike)) return null;
    return {
      sql: `INSERT INTO ${table} (${first.map(([k]) => quoted.get(k)!).join(", ")}) VALUES ${rows.map((row) => `(${placeholders(row!)})`).join(", ")}`,
      params: rows.flatMap((row) => row!.map(([k, v]) => persistent(k, v))),
    };
  };

  const fast: FastRepository<T> = {
    async findOneBy(w) {
      const c = where(w);
      if (!c) return repo.findOneBy(w);
      return (await select(c, " LIMIT 1"))[0] ?? null;
    },
    find: (opts) => find(opts, table),
    findWith: (opts, read) => find(opts, read.index ? usingIndex(read.index) : table, read.condition),
    countUsingIndex: (index, w) => count(w, usingIndex(index)),
    findWhereSql: (condition, params, tail, partialIndex) =>
      select({ sql: ` WHERE ${condition}`, params }, tail, partialIndex && driver.options.type !== "mysql" ? usingIndex(partialIndex) : table),
    async update(criteria, partial) {
      const stmt = updateSql(criteria, partial);
      if (!stmt) return repo.update(criteria as never, partial);
      const res = await run(stmt.sql, stmt.params);
      return { raw: res.raw, affected: res.affected, generatedMaps: [] };
    },
    async insert(entity) {
      const stmt = Array.isArray(entity) ? null : insertSql([entity]);
      if (!stmt) return repo.insert(entity as never);
      const res = await run(stmt.sql, stmt.params);
      // Like TypeORM: the generated increment key (SQLite: last row id; MySQL: insertId) is returned.
      const generated = increment && !(increment.propertyName in (entity as object)) ? { [increment.propertyName]: insertedId(res) } : {};
      return { identifiers: [generated], generatedMaps: [generated], raw: res.raw };
    },
    insertStatement(entities) {
      const stmt = insertSql(Array.isArray(entities) ? entities : [entities]);
      if (!stmt) throw new Error(`${meta.name}: insertStatement takes plain column values only`);
      return stmt;
    },
    updateStatement(criteria, partial, expect) {
      const stmt = updateSql(criteria, partial);
      if (!stmt) throw new Error(`${meta.name}: updateStatement takes the simple where shapes only`);
      return { ...stmt, expect };
    },
    hydrate,
    delete: (criteria) => repo.delete(criteria as never),
    findOne: (opts) => repo.findOne(opts),
    createQueryBuilder: ((alias?: string) => repo.createQueryBuilder(alias)) as Repository<T>["createQueryBuilder"],
  };
  return fast;
}

/** Column types that both drivers hand back as stored, unless the column has a transformer. */
const STORED_AS_IS = new Set<unknown>(["varchar", "text", "integer"]);

/**
 * A row (every column selected) as an entity, built as one object literal: the columns both
 * drivers return as stored are copied, the others go through the driver's own conversion
 * (booleans, the bigint transformer), as TypeORM hydrates them. A loop setting properties by
 * name cost 1.5 µs per card row, the literal 0.1 µs (BENCHMARKS.md, fix 18). Only plain entities
 * (EntitySchema, no lazy relations), for which TypeORM's `metadata.create()` is an empty object.
 */
function compileHydrator<T>(meta: EntityMetadata, driver: DataSource["driver"]): (raw: Record<string, unknown>) => T {
  if (typeof meta.target === "function" || meta.lazyRelations.length > 0) throw new Error(`${meta.name}: the fast repository hydrates plain entities only`);
  const convert = meta.columns.map((col) => (STORED_AS_IS.has(col.type) && !col.transformer ? null : (v: unknown) => driver.prepareHydratedValue(v, col)));
  const fields = meta.columns.map((col, i) => {
    const value = `row[${JSON.stringify(col.databaseName)}]`;
    return `${JSON.stringify(col.propertyName)}: ${convert[i] ? `convert[${i}](${value})` : value}`;
  });
  return new Function("convert", `return (row) => ({ ${fields.join(", ")} });`)(convert);
}

/** Values written through the driver's own conversion (booleans become 1/0 on both databases). */
const storable = (v: unknown) => scalar(v) || v === null || typeof v === "boolean";
const scalar = (v: unknown): v is string | number => typeof v === "string" || (typeof v === "number" && Number.isFinite(v));
