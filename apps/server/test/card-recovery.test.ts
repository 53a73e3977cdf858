import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { dbKind, expectError, startServer, type TestServer } from "./harness.js";
import { expectKeys, ISO } from "./helpers.js";

const ATTENTION_KEYS = ["id", "account_id", "mode", "status", "hold_status", "recovery_attempts", "recovery_error", "created_at", "closed_at"];

/**
 * The recovery queue of cards whose processor follow-up (revoke, hold release) failed: ordered by
 * next attempt with exponential backoff, so cards that keep failing hold back no other; after 8
 * failures a card needs attention, is listed for the operator and retried only when the operator
 * says so. Waiting out a backoff is stood in for by setting recovery_next_at to 0 in the database.
 * The simulated processor: the rows made with SQL below have no processor card.
 */
describe(`card recovery queue (${dbKind})`, () => {
  let s: TestServer;
  beforeEach(async () => {
    s = await startServer({ PROCESSOR: "simulated", PROCESSOR_TIMEOUT_MS: "300" });
  });
  afterEach(() => s.close());

  const pass = () => s.app.services.maintenance.run();
  const recovery = async (id: string) => {
    const [row] = await s.query("SELECT recovery_attempts, recovery_next_at, recovery_error, needs_attention, revoked_at, hold_status FROM cards WHERE id = ?", [id]);
    return {
      attempts: Number(row.recovery_attempts),
      nextAt: row.recovery_next_at === null ? null : Number(row.recovery_next_at),
      error: row.recovery_error as string | null,
      attention: Boolean(Number(row.needs_attention)),
      revoked: row.revoked_at !== null,
      hold: row.hold_status as string,
    };
  };
  const dueNow = (id: string) => s.query("UPDATE cards SET recovery_next_at = 0 WHERE id = ?", [id]);
  /** A card closed while the processor fails `step`: left CLOSED with that step to finish. */
  async function closedWithFault(key: string, step: "revoke" | "cancel") {
    s.processor.clear();
    const card = (await s.request("POST", "/v1/cards", { key, body: { amount_cents: 900 } })).body;
    s.processor.fail(step, "fail");
    expectError(await s.request("POST", `/v1/cards/${card.id}/close`, { key }), 502, "processor_error");
    s.processor.clear();
    return card.id as string;
  }

  it("a stuck creation whose mode has no processor any more does not stop the pass: the rest of it runs", async () => {
    const key = await (await s.newAccount()).key();
    const stuck = (await s.request("POST", "/v1/cards", { key, body: { amount_cents: 300 } })).body.id;
    const expiring = (await s.request("POST", "/v1/cards", { key, body: { amount_cents: 400 } })).body.id;
    // Live mode has no processor on this server (PROCESSOR=simulated serves test mode only).
    await s.query("UPDATE cards SET status = 'CREATING', mode = 'live', lease_until = 1 WHERE id = ?", [stuck]);
    await s.query("UPDATE cards SET expires_at = 1 WHERE id = ?", [expiring]);
    await pass();
    expect((await s.request("GET", `/v1/cards/${expiring}`, { key })).body.status).toBe("CLOSED");
    // Each pass that cannot finish it counts; after 8 it is the operator's, listed, and left alone.
    for (let i = 0; i < 8; i++) {
      await s.query("UPDATE cards SET lease_until = 1 WHERE id = ?", [stuck]);
      await pass();
    }
    expect(await recovery(stuck)).toMatchObject({ attempts: 8, attention: true });
    expect((await recovery(stuck)).error).toMatch(/processor_not_configured|No card processor is configured for live mode/);
    const listed = (await s.admin("GET", "/cards/attention")).body.data.find((c: any) => c.id === stuck);
    expect(listed).toMatchObject({ status: "CREATING", recovery_attempts: 8 });
    const announced = await s.query("SELECT data FROM events WHERE type = 'processor.attention_needed'");
    expect(announced.filter((e) => String(e.data).includes(stuck))).toHaveLength(1);
    await s.query("UPDATE cards SET lease_until = 1 WHERE id = ?", [stuck]);
    await pass();
    expect((await recovery(stuck)).attempts).toBe(8);
    // The operator hands it back: due at once, and one more failure lists it again.
    expect((await s.admin("POST", `/cards/${stuck}/retry_recovery`)).body).toMatchObject({ id: stuck, status: "CREATING" });
    await pass();
    expect(await recovery(stuck)).toMatchObject({ attempts: 9, attention: true });
  });

  it("a creation finished at last (the operator's retry) carries none of its failures into its follow-ups", async () => {
    const key = await (await s.newAccount()).key();
    const id = (await s.request("POST", "/v1/cards", { key, body: { amount_cents: 350 } })).body.id;
    // As the pass leaves a creation it failed 8 times: the operator's.
    await s.query("UPDATE cards SET status = 'CREATING', lease_until = 1, recovery_attempts = 8, recovery_error = 'processor down', needs_attention = 1 WHERE id = ?", [id]);
    expect((await s.admin("POST", `/cards/${id}/retry_recovery`)).status).toBe(200);
    await pass();
    expect((await s.request("GET", `/v1/cards/${id}`, { key })).body.status).toBe("OPEN");
    expect(await recovery(id)).toMatchObject({ attempts: 0, attention: false, error: null });
    // Its close failing once backs off as any card's first failure does, and is not the operator's.
    s.processor.fail("revoke", "fail");
    try {
      await s.request("POST", `/v1/cards/${id}/close`, { key });
    } finally {
      s.processor.clear();
    }
    expect((await recovery(id)).attention).toBe(false);
  });

  it("a revoke that keeps failing backs off, then needs attention and is listed; the operator's retry finishes it", async () => {
    const account = await s.newAccount();
    const key = await account.key();
    const failing = await closedWithFault(key, "revoke");
    s.processor.fail("revoke", "fail");

    const before = Date.now();
    await pass();
    let r = await recovery(failing);
    expect(r).toMatchObject({ attempts: 1, attention: false, revoked: false });
    expect(r.error).toMatch(/revoke/);
    // backoffMs(1): 2 s ± 25 %
    expect(r.nextAt).toBeGreaterThanOrEqual(before + 1500);
    expect(r.nextAt).toBeLessThanOrEqual(Date.now() + 2500);
    await pass();
    expect((await recovery(failing)).attempts).toBe(1); // not due yet: not tried again

    for (let attempt = 2; attempt <= 8; attempt++) {
      await dueNow(failing);
      const at = Date.now();
      await pass();
      r = await recovery(failing);
      expect(r.attempts).toBe(attempt);
      if (attempt < 8) {
        // Exponential: 2 s · 2^(attempt-1), ± 25 %.
        expect(r.nextAt! - at).toBeGreaterThanOrEqual(0.75 * 2000 * 2 ** (attempt - 1) - 1000);
        expect(r.nextAt! - at).toBeLessThanOrEqual(1.25 * 2000 * 2 ** (attempt - 1) + 1000);
      }
    }
    expect(r).toMatchObject({ attempts: 8, attention: true, nextAt: null, revoked: false });

    // Listed for the operator, by account too; not retried on its own any more.
    const listed = await s.admin("GET", "/cards/attention");
    expect(listed.status).toBe(200);
    const item = listed.body.data.find((c: any) => c.id === failing);
    expectKeys(item, ATTENTION_KEYS);
    expect(item).toMatchObject({ account_id: account.id, mode: "test", status: "CLOSED", hold_status: "OPEN", recovery_attempts: 8 });
    expect(item.recovery_error).toMatch(/revoke/);
    expect(item.created_at).toMatch(ISO);
    expect(item.closed_at).toMatch(ISO);
    expect((await s.admin("GET", `/cards/attention?account_id=${account.id}`)).body.data.map((c: any) => c.id)).toEqual([failing]);
    expect((await s.admin("GET", `/cards/attention?account_id=${s.accountId}`)).body.data).toEqual([]);
    await dueNow(failing);
    await pass();
    expect((await recovery(failing)).attempts).toBe(8);

    // A card needing attention holds back no other: a hold left to release is released.
    const healthy = await closedWithFault(key, "cancel");
    s.processor.fail("revoke", "fail");
    await pass();
    expect(await recovery(healthy)).toMatchObject({ attempts: 0, hold: "RELEASED", revoked: true });
    expectError(await s.admin("POST", `/cards/${healthy}/retry_recovery`), 409, "card_not_in_attention");
    expectError(await s.admin("POST", "/cards/card_doesnotexist/retry_recovery"), 404, "not_found");

    // The fault is gone: the operator hands the card back, and the next pass finishes it.
    s.processor.clear();
    const retried = await s.admin("POST", `/cards/${failing}/retry_recovery`);
    expect(retried.status).toBe(200);
    expectKeys(retried.body, ATTENTION_KEYS);
    expect(retried.body).toMatchObject({ id: failing, recovery_attempts: 8 });
    expect((await s.admin("GET", "/cards/attention")).body.data).toEqual([]);
    expect((await recovery(failing)).nextAt).toBeNull();
    await pass();
    expect(await recovery(failing)).toMatchObject({ attempts: 0, nextAt: null, error: null, attention: false, revoked: true, hold: "RELEASED" });
    expect(await s.processor.cards(failing)).toEqual(["canceled"]);
    expect(await s.processor.holds(failing)).toMatchObject([{ status: "canceled" }]);
    expectError(await s.admin("POST", `/cards/${failing}/retry_recovery`), 409, "card_not_in_attention");
  });

  it("a USED card past its expiry whose deactivation keeps failing is listed for the operator, whose retry finishes it", async () => {
    const account = await s.newAccount();
    const key = await account.key();
    const card = (await s.request("POST", "/v1/cards", { key, body: { amount_cents: 700 } })).body;
    // A purchase still pending: the card is USED, its hold in force.
    expect((await s.request("POST", `/v1/test_helpers/cards/${card.id}/authorizations`, { key, body: { amount_cents: 300 } })).body.approved).toBe(true);
    await s.query("UPDATE cards SET expires_at = 1, recovery_attempts = 7 WHERE id = ?", [card.id]);
    s.processor.fail("revoke", "fail");
    await pass();
    expect(await recovery(card.id)).toMatchObject({ attempts: 8, attention: true, revoked: false });
    const listed = (await s.admin("GET", `/cards/attention?account_id=${account.id}`)).body.data;
    expect(listed).toMatchObject([{ id: card.id, status: "USED", recovery_attempts: 8 }]);
    expect((await s.admin("GET", "/cards/attention")).body.data.map((c: any) => c.id)).toContain(card.id);

    s.processor.clear();
    expect((await s.admin("POST", `/cards/${card.id}/retry_recovery`)).status).toBe(200);
    await pass();
    expect(await recovery(card.id)).toMatchObject({ attention: false, revoked: true });
    expect(await s.processor.cards(card.id)).toEqual(["canceled"]);
    expect((await s.admin("GET", `/cards/attention?account_id=${account.id}`)).body.data).toEqual([]);
  });

  it("a close retried by the card's owner that finishes the follow-up takes the card off the operator's list", async () => {
    const account = await s.newAccount();
    const key = await account.key();
    const id = await closedWithFault(key, "revoke");
    // The 8 failed passes of the first test, set directly.
    await s.query("UPDATE cards SET recovery_attempts = 8, recovery_error = 'revoke failed', needs_attention = 1 WHERE id = ?", [id]);
    expect((await s.admin("GET", `/cards/attention?account_id=${account.id}`)).body.data).toHaveLength(1);
    expect((await s.request("POST", `/v1/cards/${id}/close`, { key })).body).toEqual({ ok: true, status: "CLOSED" });
    expect(await recovery(id)).toMatchObject({ attempts: 0, error: null, attention: false, revoked: true, hold: "RELEASED" });
    expect((await s.admin("GET", `/cards/attention?account_id=${account.id}`)).body.data).toEqual([]);
  });

  it("a card whose follow-up something else finished (a processor's webhook) leaves the operator's list, and is not retried from it", async () => {
    const account = await s.newAccount();
    const key = await account.key();
    const id = await closedWithFault(key, "revoke");
    await s.query("UPDATE cards SET recovery_attempts = 8, recovery_error = 'revoke failed', needs_attention = 1 WHERE id = ?", [id]);
    expect((await s.admin("GET", `/cards/attention?account_id=${account.id}`)).body.data.map((c: any) => c.id)).toEqual([id]);
    // As a processor's webhook leaves it: the card canceled there (revoked), its hold released.
    await s.query("UPDATE cards SET revoked_at = ?, hold_status = 'RELEASED' WHERE id = ?", [Date.now(), id]);
    expect((await s.admin("GET", `/cards/attention?account_id=${account.id}`)).body.data).toEqual([]);
    expect((await s.admin("GET", "/cards/attention")).body.data.map((c: any) => c.id)).not.toContain(id);
    // Its needs_attention is still set, but the card is not on the list: the retry answers as the list does.
    expectError(await s.admin("POST", `/cards/${id}/retry_recovery`), 409, "card_not_in_attention");
  });

  it("a full batch of failing cards does not starve a healthy one behind it (no head-of-line blocking)", async () => {
    const account = await s.newAccount();
    const key = await account.key();
    // 100 cards (one pass's batch) closed but not revoked, older than the healthy one; inserted
    // with SQL rather than issued and closed through the API one by one, for speed.
    const now = Date.now();
    const ids = Array.from({ length: 100 }, (_, i) => `card_stuck${String(i).padStart(3, "0")}`);
    await s.query(
      `INSERT INTO cards (id, account_id, mode, status, amount_cents, remaining_cents, spent_cents, hold_status, created_at, closed_at, expires_at) VALUES ${ids.map(() => "(?, ?, 'test', 'CLOSED', 100, 0, 0, 'RELEASED', ?, ?, ?)").join(", ")}`,
      ids.flatMap((id) => [id, account.id, now, now, now + 86_400_000]),
    );
    const healthy = await closedWithFault(key, "cancel");
    s.processor.fail("revoke", "fail");

    // First pass: the batch is the 100 older cards (never tried: due first, oldest first); all fail.
    await pass();
    const tried = await s.query("SELECT recovery_attempts AS n, COUNT(*) AS c FROM cards WHERE account_id = ? AND id <> ? GROUP BY recovery_attempts", [account.id, healthy]);
    expect(tried.map((t) => [Number(t.n), Number(t.c)])).toEqual([[1, 100]]);
    expect((await recovery(healthy)).hold).toBe("OPEN");
    const waits = await s.query("SELECT MIN(recovery_next_at) AS n FROM cards WHERE account_id = ? AND id <> ?", [account.id, healthy]);
    expect(Number(waits[0].n)).toBeGreaterThan(now);
    // Second pass: they wait out their backoff, so the healthy card is reached. (Before the queue,
    // every pass took the same 100 failing cards and never this one.) The first backoff is 1.5-2.5 s,
    // which a loaded machine's first pass can outlast: the wait is made a minute here.
    await s.query("UPDATE cards SET recovery_next_at = ? WHERE account_id = ? AND id <> ?", [Date.now() + 60_000, account.id, healthy]);
    await pass();
    expect(await recovery(healthy)).toMatchObject({ attempts: 0, hold: "RELEASED" });
    expect(await s.processor.holds(healthy)).toMatchObject([{ status: "canceled" }]);
    expect(Number((await s.query("SELECT MAX(recovery_attempts) AS n FROM cards WHERE account_id = ?", [account.id]))[0].n)).toBe(1);
  });
});
