import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { dbKind, requestTo, startServer, type TestServer } from "./harness.js";

/**
 * An SQLite file someone ran ANALYZE on: the next start empties sqlite_stat4 (its samples make
 * SQLite prepare a statement again on every run) and keeps sqlite_stat1; the server works on.
 */
describe.runIf(dbKind === "sqlite")("SQLite statistics", () => {
  const dir = mkdtempSync(join(tmpdir(), "cardctl-stats-"));
  const databaseUrl = `sqlite:${join(dir, "db.sqlite")}`;
  const servers: TestServer[] = [];
  const count = async (s: TestServer, table: string) => Number((await s.query(`SELECT COUNT(*) AS n FROM ${table}`))[0].n);

  afterAll(async () => {
    for (const s of servers) await s.app.app.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("a start after ANALYZE drops the STAT4 samples, keeps the row counts, and serves the same data", async () => {
    const first = await startServer({}, { databaseUrl });
    servers.push(first);
    for (let i = 0; i < 12; i++) {
      const card = await first.request("POST", "/v1/cards", { body: { amount_cents: 500 + i, agent_id: `agent-${i % 3}` } });
      expect(card.status).toBe(201);
    }
    await first.query("ANALYZE");
    expect(await count(first, "sqlite_stat4")).toBeGreaterThan(0);
    const stat1 = await count(first, "sqlite_stat1");
    expect(stat1).toBeGreaterThan(0);
    await first.app.app.close();

    const second = await startServer({}, { databaseUrl });
    servers.push(second);
    expect(await count(second, "sqlite_stat4")).toBe(0);
    expect(await count(second, "sqlite_stat1")).toBe(stat1);
    const request = requestTo(second.url, first.apiKey);
    const list = await request("GET", "/v1/cards?agent_id=agent-1&limit=10");
    expect(list.status).toBe(200);
    expect(list.body.data.map((c: { amount_cents: number }) => c.amount_cents)).toEqual([510, 507, 504, 501]);
    const balance = await request("GET", "/v1/balance");
    expect(balance.body).toMatchObject({ open_cards: 12, held_cents: 12 * 500 + 66 });
  });
});
