import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";
import type { DataSource } from "typeorm";

export interface CheckpointerOptions {
  /** How often the worker copies the WAL back into the database file. */
  intervalMs?: number;
  /** WAL length (frames) past which the worker also restarts the WAL from its beginning. */
  restartFrames?: number;
}

/** SQLite's default: a commit that grows the WAL past this many pages runs a checkpoint itself. */
const DEFAULT_AUTOCHECKPOINT = 1000;
/**
 * While the worker runs, the server's connection checkpoints only past this (200 MB): a safety
 * net that bounds the WAL should the worker fall behind, never reached when it keeps up.
 */
const SAFETY_AUTOCHECKPOINT = 50_000;

/**
 * The worker: its own connection to the same file. PASSIVE copies what it can without blocking
 * anyone; under a steady stream of commits it never catches up with the last frame, so the WAL
 * would only grow. Past restartFrames a RESTART finishes the copy (writers wait for the few
 * frames PASSIVE left) and lets the next commit start the WAL over.
 */
const WORKER_SOURCE = `
const { workerData } = require("node:worker_threads");
const Database = require(workerData.driver);
const db = new Database(workerData.path);
db.pragma("busy_timeout = 5000");
setInterval(() => {
  const [{ log }] = db.pragma("wal_checkpoint(PASSIVE)");
  if (log > workerData.restartFrames) db.pragma("wal_checkpoint(RESTART)");
}, workerData.intervalMs);
`;

type Connection = { pragma(s: string, o?: { simple: boolean }): unknown; name: string; memory: boolean };

/**
 * Moves SQLite's WAL checkpoints off the event loop. By default the commit that crosses 1000 WAL
 * pages copies them into the database file and fsyncs it, on the thread that serves requests:
 * every few dozen cards one request waited for a disk flush. A worker thread now checkpoints on
 * its own connection, and the server's connection keeps only a far-off safety threshold. If the
 * worker fails, the default comes back. A no-op for MySQL and in-memory databases. Returns stop.
 */
export function startCheckpointer(ds: DataSource, opts: CheckpointerOptions = {}): () => Promise<void> {
  const db = (ds.driver as unknown as { databaseConnection?: Connection }).databaseConnection;
  if (ds.options.type !== "better-sqlite3" || !db || db.memory) return async () => undefined;
  const worker = new Worker(WORKER_SOURCE, {
    eval: true,
    workerData: {
      driver: createRequire(import.meta.url).resolve("better-sqlite3"),
      path: db.name,
      intervalMs: opts.intervalMs ?? 100,
      restartFrames: opts.restartFrames ?? 4000,
    },
  });
  worker.unref();
  const restore = () => db.pragma(`wal_autocheckpoint = ${DEFAULT_AUTOCHECKPOINT}`);
  worker.once("error", restore);
  db.pragma(`wal_autocheckpoint = ${SAFETY_AUTOCHECKPOINT}`);
  return async () => {
    worker.off("error", restore);
    await worker.terminate();
    if (ds.isInitialized) restore();
  };
}
