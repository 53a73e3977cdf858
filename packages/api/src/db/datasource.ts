import "reflect-metadata";
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import { DataSource } from "typeorm";
import { entities } from "./entities.js";
import type { SqliteConnection } from "./sqlite-connection.js";
import { dropStat4Samples } from "./sqlite-statistics.js";
import { Init1732200000000 } from "./migrations/1732200000000-init.js";
import { Idempotency1732300000000 } from "./migrations/1732300000000-idempotency.js";
import { Stripe1732400000000 } from "./migrations/1732400000000-stripe.js";
import { BinaryCollation1732500000000 } from "./migrations/1732500000000-binary-collation.js";
import { HeldIndex1732600000000 } from "./migrations/1732600000000-held-index.js";
import { PartialIndexes1732700000000 } from "./migrations/1732700000000-partial-indexes.js";
import { PartialIndexesAgain1733300000000 } from "./migrations/1733300000000-partial-indexes-again.js";
import { OrphanApprovals1732800000000 } from "./migrations/1732800000000-orphan-approvals.js";
import { DecisionKeys1732900000000 } from "./migrations/1732900000000-decision-keys.js";
import { MoneyLifecycle1733100000000 } from "./migrations/1733100000000-money-lifecycle.js";
import { Cardholders1733000000000 } from "./migrations/1733000000000-cardholders.js";
import { CardRecovery1733200000000 } from "./migrations/1733200000000-card-recovery.js";
import { Events1733400000000 } from "./migrations/1733400000000-events.js";
import { Webhooks1733500000000 } from "./migrations/1733500000000-webhooks.js";
import { Owners1733600000000 } from "./migrations/1733600000000-owners.js";
import { WebhookClaimIndex1733700000000 } from "./migrations/1733700000000-webhook-claim-index.js";
import { SpendIndex1733800000000 } from "./migrations/1733800000000-spend-index.js";
import { CardBalances1733900000000 } from "./migrations/1733900000000-card-balances.js";
import { DropHeldIndex1734000000000 } from "./migrations/1734000000000-drop-held-index.js";
import { WebhookSecretRotation1734100000000 } from "./migrations/1734100000000-webhook-secret-rotation.js";
import { CardSweepIndexes1734200000000 } from "./migrations/1734200000000-card-sweep-indexes.js";
import { WebhookFanOuts1734300000000 } from "./migrations/1734300000000-webhook-fan-outs.js";
import { WithoutRowid1734400000000 } from "./migrations/1734400000000-without-rowid.js";
import { NoAutoincrement1734500000000 } from "./migrations/1734500000000-no-autoincrement.js";
import { ListedCardsIndex1734600000000 } from "./migrations/1734600000000-listed-cards-index.js";
import { CardLedgerVersion1734700000000 } from "./migrations/1734700000000-card-ledger-version.js";
import { SignInFailures1734800000000 } from "./migrations/1734800000000-sign-in-failures.js";
import { TransactionRefundOf1734900000000 } from "./migrations/1734900000000-transaction-refund-of.js";
import { StripeCardholders1735000000000 } from "./migrations/1735000000000-stripe-cardholders.js";

export type DatabaseKind = "sqlite" | "mysql";

/** `sqlite:<path>`, `sqlite::memory:` or `mysql://user:pass@host:port/db`. */
export function createDataSource(url: string): DataSource {
  const common = { entities, migrations: [Init1732200000000, Idempotency1732300000000, Stripe1732400000000, BinaryCollation1732500000000, HeldIndex1732600000000, PartialIndexes1732700000000, OrphanApprovals1732800000000, DecisionKeys1732900000000, MoneyLifecycle1733100000000, Cardholders1733000000000, CardRecovery1733200000000, PartialIndexesAgain1733300000000, Events1733400000000, Webhooks1733500000000, Owners1733600000000, WebhookClaimIndex1733700000000, SpendIndex1733800000000, CardBalances1733900000000, DropHeldIndex1734000000000, WebhookSecretRotation1734100000000, CardSweepIndexes1734200000000, WebhookFanOuts1734300000000, WithoutRowid1734400000000, NoAutoincrement1734500000000, ListedCardsIndex1734600000000, CardLedgerVersion1734700000000, SignInFailures1734800000000, TransactionRefundOf1734900000000, StripeCardholders1735000000000], synchronize: false, logging: false as const };
  if (url.startsWith("sqlite:")) {
    const path = url.slice("sqlite:".length);
    if (path !== ":memory:") mkdirSync(dirname(path), { recursive: true });
    return new DataSource({
      ...common,
      type: "better-sqlite3",
      database: path,
      // WAL lets readers proceed while a writer commits; busy_timeout waits instead of SQLITE_BUSY.
      prepareDatabase: (db: SqliteConnection) => {
        db.pragma("journal_mode = WAL");
        db.pragma("busy_timeout = 5000");
        db.pragma("synchronous = NORMAL");
        dropStat4Samples(db);
      },
    });
  }
  if (url.startsWith("mysql://") || url.startsWith("mariadb://")) {
    return retryDeadlocks(new DataSource({
      ...common,
      type: "mysql",
      url: url.replace(/^mariadb:/, "mysql:"),
      timezone: "Z",
      charset: "utf8mb4",
      supportBigNumbers: true,
      bigNumberStrings: false,
      // trace: mysql2's promise API (TypeORM's runner) captured a stack trace on every query.
      // maxPreparedStatements: each connection keeps its most recent 256 (not 16,000), so an
      // instance holds at most 5,120 of the server's 16,382 (max_prepared_stmt_count, shared by
      // every client) however many statement texts it has sent.
      extra: { connectionLimit: 20, trace: false, maxPreparedStatements: 256 },
    }));
  }
  throw new Error(`Unsupported DATABASE_URL '${url}': use sqlite:<path>, sqlite::memory: or mysql://user:pass@host:port/db`);
}

const DEADLOCK_ATTEMPTS = 5;

/**
 * InnoDB picks a victim when two statements lock the same rows through different indexes (say a
 * conditional claim by primary key and the expiry sweep by status): the victim's statement is
 * rolled back whole with ER_LOCK_DEADLOCK. Outside a transaction that statement is all there is,
 * so running it again is safe; inside one, the caller's transaction is gone and the error stands.
 */
function retryDeadlocks(ds: DataSource): DataSource {
  const driver = ds.driver;
  const create = driver.createQueryRunner.bind(driver);
  driver.createQueryRunner = (mode) => {
    const runner = create(mode);
    const query = runner.query.bind(runner) as (...args: unknown[]) => Promise<any>;
    runner.query = ((...args: unknown[]) => retryOnDeadlock(() => query(...args), () => runner.isTransactionActive)) as typeof runner.query;
    return runner;
  };
  return ds;
}

/** Runs a single statement again when InnoDB aborted it as a deadlock victim, unless inside a transaction. */
export async function retryOnDeadlock<T>(run: () => Promise<T>, inTransaction: () => boolean = () => false): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await run();
    } catch (err) {
      if (inTransaction() || attempt >= DEADLOCK_ATTEMPTS || !isDeadlock(err)) throw err;
      await new Promise((resolve) => setTimeout(resolve, Math.random() * 5 * attempt));
    }
  }
}

/** The driver's error code of a failed query (TypeORM wraps it in QueryFailedError). */
function driverCode(err: unknown): string | undefined {
  const e = err as { code?: string; driverError?: { code?: string } };
  return e?.driverError?.code ?? e?.code;
}

const isDeadlock = (err: unknown) => driverCode(err) === "ER_LOCK_DEADLOCK";

export const databaseKind = (ds: DataSource): DatabaseKind => (ds.options.type === "mysql" ? "mysql" : "sqlite");

/** Runs pending migrations; on MySQL under a named lock so instances starting together take turns. */
export async function migrate(ds: DataSource): Promise<void> {
  if (databaseKind(ds) !== "mysql") {
    await ds.runMigrations({ transaction: "all" });
    return;
  }
  const runner = ds.createQueryRunner();
  try {
    // 0 when another instance held it for the whole minute (a long migration): wait on.
    for (;;) {
      const [row] = await runner.query("SELECT GET_LOCK('cardctl_migrate', 60) AS got");
      if (Number(row?.got) === 1) break;
      if (row?.got === null || row?.got === undefined) throw new Error("MySQL refused the migration lock (GET_LOCK returned NULL).");
    }
    await ds.runMigrations({ transaction: "none" });
  } finally {
    await runner.query("SELECT RELEASE_LOCK('cardctl_migrate')").catch(() => undefined);
    await runner.release();
  }
}

/** True when an insert failed on a unique index, on either database. */
export function isUniqueViolation(err: unknown): boolean {
  const code = driverCode(err);
  return code === "ER_DUP_ENTRY" || code === "SQLITE_CONSTRAINT_UNIQUE" || code === "SQLITE_CONSTRAINT_PRIMARYKEY";
}

/** Rows changed by an UPDATE, from either driver's result shape. */
export function affected(result: { affected?: number | null }): number {
  return result.affected ?? 0;
}
