import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createDataSource, migrate } from "../src/db/datasource.js";
import { startCheckpointer } from "../src/db/checkpointer.js";

const PAGE = 4096;

describe("WAL checkpoints off the event loop (SQLite)", () => {
  const cleanup: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const c of cleanup.splice(0).reverse()) await c();
  });

  async function open() {
    const dir = mkdtempSync(join(tmpdir(), "cardctl-ckpt-"));
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
    const ds = createDataSource(`sqlite:${join(dir, "db.sqlite")}`);
    await ds.initialize();
    cleanup.push(() => ds.destroy());
    await migrate(ds);
    return { ds, file: join(dir, "db.sqlite"), wal: join(dir, "db.sqlite-wal") };
  }

  const autocheckpoint = (ds: Awaited<ReturnType<typeof open>>["ds"]) =>
    Number((ds.driver as any).databaseConnection.pragma("wal_autocheckpoint", { simple: true }));

  /** About one WAL frame per commit: small rows in a table of their own. */
  async function commits(ds: Awaited<ReturnType<typeof open>>["ds"], n: number) {
    for (let i = 0; i < n; i++) await ds.query("INSERT INTO sim_ephemeral_keys (secret_hash, card_id, expires_at) VALUES (?, ?, ?)", [`h${Math.random()}`, "ic_x", i]);
  }

  it("copies the WAL into the database file in the background; the server's connection no longer does", async () => {
    const { ds, file } = await open();
    cleanup.push(startCheckpointer(ds, { intervalMs: 20, autocheckpointPages: 1_000_000 }));
    expect(autocheckpoint(ds)).toBe(1_000_000);
    const before = statSync(file).size;
    await commits(ds, 2000); // thousands of WAL frames, some 80 pages of rows
    await new Promise((r) => setTimeout(r, 200));
    expect(statSync(file).size).toBeGreaterThan(before + 20 * PAGE);
  });

  it("restarts the WAL at the threshold, so it stays bounded under a stream of commits", async () => {
    const { ds, wal } = await open();
    // The default interval: a worker checkpointing back to back (20 ms on a loaded machine) holds the
    // checkpoint lock so often that the connection's own checkpoint at the threshold keeps missing it.
    cleanup.push(startCheckpointer(ds, { autocheckpointPages: 500 }));
    for (let burst = 0; burst < 20; burst++) {
      await commits(ds, 300);
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(statSync(wal).size).toBeLessThan(2_000 * PAGE);
  });

  it("hands checkpoints back to the connection when stopped", async () => {
    const { ds } = await open();
    const stop = startCheckpointer(ds);
    expect(autocheckpoint(ds)).toBe(50_000);
    await stop();
    expect(autocheckpoint(ds)).toBe(1000);
  });

  it("does nothing for in-memory databases", async () => {
    const ds = createDataSource("sqlite::memory:");
    await ds.initialize();
    cleanup.push(() => ds.destroy());
    const stop = startCheckpointer(ds);
    expect(autocheckpoint(ds as any)).toBe(1000);
    await stop();
  });
});
