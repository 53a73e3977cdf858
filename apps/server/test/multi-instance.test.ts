import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, dbKind, expectError, freshDatabase, requestTo } from "./harness.js";
import { spawnServer, type ServerProcess } from "./processes.js";
import { openStream } from "./sse.js";

const REDIS_URL = process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379";

/**
 * Two server processes on one MariaDB database and one Redis: idempotency, rate limits and
 * single-use approvals hold across them. Needs a shared database, so it runs in the MariaDB pass.
 */
describe.runIf(dbKind === "mysql")("two instances on one MariaDB and one Redis", () => {
  let a: ServerProcess;
  let b: ServerProcess;
  let drop: () => Promise<void>;

  beforeAll(async () => {
    const db = await freshDatabase();
    drop = db.drop;
    const env = { DATABASE_URL: db.url, REDIS_URL, RATE_LIMIT_PER_HOUR: "30", MAINTENANCE_INTERVAL_MS: "100" };
    // Started together: migrations and the first-start seed must not run twice.
    [a, b] = await Promise.all([spawnServer(env), spawnServer(env)]);
  });
  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
    await drop?.();
  });

  /** A fresh full test key on a fresh account, through the operator API of instance A. */
  async function freshKey(): Promise<string> {
    const admin = requestTo(a.url, null);
    const auth = { authorization: `Bearer ${ADMIN_TOKEN}` };
    const acct = (await admin("POST", "/admin/v1/accounts", { body: { name: "multi" }, headers: auth })).body;
    await admin("POST", `/admin/v1/accounts/${acct.id}/kyb`, { body: { verified: true }, headers: auth });
    await admin("POST", `/admin/v1/accounts/${acct.id}/payment_method`, { body: { payment_method: "pm_card_visa" }, headers: auth });
    return (await admin("POST", `/admin/v1/accounts/${acct.id}/keys`, { body: { mode: "test" }, headers: auth })).body.secret;
  }

  it("seeded exactly one demo key across both first starts", () => {
    const keys = [a.apiKey, b.apiKey].filter(Boolean);
    expect(keys).toHaveLength(1);
  });

  it("shares idempotency keys: parallel retries on both instances make one card", async () => {
    const key = await freshKey();
    const [onA, onB] = [requestTo(a.url, key), requestTo(b.url, key)];
    const send = (i: number) =>
      (i % 2 ? onA : onB)("POST", "/v1/cards", { body: { amount_cents: 1500 }, headers: { "idempotency-key": "multi-1" } });
    const replies = await Promise.all(Array.from({ length: 10 }, (_, i) => send(i)));
    const ok = replies.filter((r) => r.status === 201);
    expect(ok.length).toBeGreaterThanOrEqual(1);
    for (const r of replies.filter((r) => r.status !== 201)) expectError(r, 409, "idempotency_key_in_use");
    expect(new Set(ok.map((r) => r.body.id)).size).toBe(1);
    const replay = await onB("POST", "/v1/cards", { body: { amount_cents: 1500 }, headers: { "idempotency-key": "multi-1" } });
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.body.id).toBe(ok[0]!.body.id);
    expect((await onA("GET", "/v1/cards")).body.data).toHaveLength(1);
    expect((await onA("GET", "/v1/balance")).body.held_cents).toBe(1500);
  });

  it("shares rate limits: the 31st request of the hour is refused on either instance", async () => {
    const key = await freshKey();
    const [onA, onB] = [requestTo(a.url, key), requestTo(b.url, key)];
    for (let i = 0; i < 30; i++) {
      const r = await (i % 2 ? onA : onB)("GET", "/v1/balance");
      expect(r.status).toBe(200);
      expect(Number(r.headers.get("ratelimit-remaining"))).toBe(29 - i);
    }
    const refusedA = await onA("GET", "/v1/balance");
    const refusedB = await onB("GET", "/v1/balance");
    expectError(refusedA, 429, "rate_limited");
    expectError(refusedB, 429, "rate_limited");
    expect(Number(refusedB.headers.get("retry-after"))).toBeGreaterThan(0);
  });

  it("approves a request once across instances", async () => {
    const key = await freshKey();
    const [onA, onB] = [requestTo(a.url, key), requestTo(b.url, key)];
    const pending = await onA("POST", "/v1/cards", { body: { amount_cents: 800, policy_override: { approval_required: true } } });
    expect(pending.status).toBe(202);
    const id = pending.body.approval_id;
    const replies = await Promise.all(
      Array.from({ length: 12 }, (_, i) => (i % 2 ? onA : onB)("POST", `/v1/approvals/${id}/approve`)),
    );
    expect(replies.filter((r) => r.status === 201)).toHaveLength(1);
    for (const r of replies.filter((r) => r.status !== 201)) expectError(r, 409, "approval_not_pending");
    expect((await onB("GET", "/v1/cards")).body.data).toHaveLength(1);
  });

  it("streams an event made on instance A to a stream on instance B; racing approvals announce once", async () => {
    const key = await freshKey();
    const [onA, onB] = [requestTo(a.url, key), requestTo(b.url, key)];
    const stream = await openStream(b.url, key);
    try {
      const card = (await onA("POST", "/v1/cards", { body: { amount_cents: 700 } })).body;
      expect((await stream.waitForEvent("card.created")).data.object.id).toBe(card.id);
      const pending = (await onB("POST", "/v1/cards", { body: { amount_cents: 300, policy_override: { approval_required: true } } })).body;
      await Promise.all(Array.from({ length: 6 }, (_, i) => (i % 2 ? onA : onB)("POST", `/v1/approvals/${pending.approval_id}/approve`)));
      await stream.waitForEvent("approval.approved");
      const issued = (await onA("GET", "/v1/events?type=approval.approved")).body.data;
      expect(issued).toHaveLength(1);
      // Every event once, in the order they were written.
      await stream.until(() => stream.events().length >= 4, "four events");
      const listed = (await onA("GET", "/v1/events")).body.data.filter((e: any) => e.type !== "api_key.created" && !e.type.startsWith("account.")).reverse();
      expect(stream.events().map((e) => e.id)).toEqual(listed.map((e: any) => e.id));
      expect(listed.map((e: any) => e.type)).toEqual(["card.created", "approval.created", "approval.approved", "card.created"]);
    } finally {
      await stream.close();
    }
  });

  it("logged no unexpected error on either instance (lock conflicts are retried, not 500s)", () => {
    expect(a.output() + b.output()).not.toContain("unhandled error");
  });
});
