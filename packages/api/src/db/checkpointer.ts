import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";
import type { DataSource } from "typeorm";
import { sqliteConnectionOf } from "./sqlite-connection.js";

export interface CheckpointerOptions {
  /** How often the worker copies the WAL back into the database file. */
  intervalMs?: number;
  /** WAL length (pages) at which the server's connection finishes a checkpoint and the WAL restarts. */
  autocheckpointPages?: number;
}

/** SQLite's default: a commit that grows the WAL past this many pages runs a checkpoint itself. */
const DEFAULT_AUTOCHECKPOINT = 1000;

/** The worker: its own connection to the same file, copying the WAL back every interval. */
const WORKER_SOURCE = `
const { workerData } = require("node:worker_threads");
const Database = require(workerData.driver);
const db = new Database(workerData.path);
db.pragma("busy_timeout = 5000");
setInterval(() => db.pragma("wal_checkpoint(PASSIVE)"), workerData.intervalMs);
`;

/**
 * Moves the work of SQLite's WAL checkpoints off the event loop. By default the commit that
 * crosses 1000 WAL pages copies them into the database file and fsyncs both files, on the thread
 * that serves requests: every few dozen cards one request waited for a disk flush.
 *
 * A worker thread now runs PASSIVE checkpoints on its own connection every 100 ms; they block no
 * reader or writer. Under a steady stream of commits they never catch the last frame, and only a
 * checkpoint that does lets the WAL start over, so the server's connection still checkpoints, but
 * only past 50,000 pages (200 MB): by then the worker has copied and synced nearly everything,
 * and that checkpoint copies the last frames, syncs little and restarts the WAL (whose file keeps
 * its size, so the next round does not grow it again). If the worker fails, SQLite's default comes
 * back. A no-op for MySQL and in-memory databases. Returns the stop function.
 */
export function startCheckpointer(ds: DataSource, opts: CheckpointerOptions = {}): () => Promise<void> {
  const db = sqliteConnectionOf(ds);
  if (ds.options.type !== "better-sqlite3" || !db || db.memory) return async () => undefined;
  const worker = new Worker(WORKER_SOURCE, {
    eval: true,
    workerData: { driver: createRequire(import.meta.url).resolve("better-sqlite3"), path: db.name, intervalMs: opts.intervalMs ?? 100 },
  });
  worker.unref();
  const restore = () => db.pragma(`wal_autocheckpoint = ${DEFAULT_AUTOCHECKPOINT}`);
  worker.once("error", restore);
  db.pragma(`wal_autocheckpoint = ${opts.autocheckpointPages ?? 50_000}`);
  return async () => {
    worker.off("error", restore);
    await worker.terminate();
    if (ds.isInitialized) restore();
  };
}
