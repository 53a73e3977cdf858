import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { dbKind, expectError, processor, startServer, type TestServer } from "./harness.js";

/**
 * A request that outlives its creation lease (a stall between its hold and its mint) while the
 * recovery pass takes its card over and finishes it: whatever the late request then does, the card
 * the recovery finished keeps its hold and stays the only live card, and the request's own card
 * is revoked.
 */
describe(`a request that outlives its creation lease (${dbKind}, ${processor})`, () => {
  let s: TestServer;
  let key: string;
  let stalled: { cardId: string; resume: () => void } | null;
  let paused: Promise<void>;
  beforeEach(async () => {
    let reached!: () => void;
    paused = new Promise((resolve) => (reached = resolve));
    stalled = null;
    s = await startServer(
      { PROCESSOR_TIMEOUT_MS: "1000" },
      {
        // The first card's creation stalls after its hold until the test lets it go on.
        afterHold: (cardId) =>
          stalled
            ? Promise.resolve()
            : new Promise<void>((resume) => {
                stalled = { cardId, resume };
                reached();
              }),
      },
    );
    key = await (await s.newAccount()).key();
  });
  afterEach(() => s.close());

  /** Starts a create, lets its lease run out at the stall, and has the recovery pass finish the card. */
  async function overrun() {
    const request = s.request("POST", "/v1/cards", { key, body: { amount_cents: 700 }, headers: { "idempotency-key": "overrun" } });
    await paused;
    const cardId = stalled!.cardId;
    await s.query("UPDATE cards SET lease_until = 1 WHERE id = ?", [cardId]);
    await s.app.services.maintenance.run();
    const [row] = await s.query("SELECT status, processor_card_id FROM cards WHERE id = ?", [cardId]);
    expect(row.status).toBe("OPEN");
    return { request, cardId, recovered: row.processor_card_id as string };
  }

  /**
   * Starts a create, and at its stall makes approval required, lets the request's key and card
   * leases run out, and retries with its key: the retry (its first attempt presumed dead) answers.
   */
  async function overrunWithRetry() {
    const request = s.request("POST", "/v1/cards", { key, body: { amount_cents: 700 }, headers: { "idempotency-key": "overrun" } });
    await paused;
    const cardId = stalled!.cardId;
    expect((await s.request("PUT", "/v1/policies/default", { key, body: { approval_required: true, max_amount_cents: 50000 } })).status).toBe(200);
    await s.query("UPDATE cards SET lease_until = 1 WHERE id = ?", [cardId]);
    await s.query("UPDATE idempotency_keys SET locked_until = 1");
    const retry = await s.request("POST", "/v1/cards", { key, body: { amount_cents: 700 }, headers: { "idempotency-key": "overrun" } });
    expect(retry.status, JSON.stringify(retry.body)).toBe(201);
    expect(retry.body.id).toBe(cardId);
    expect(await s.query("SELECT id FROM approvals")).toEqual([]);
    return { request, cardId };
  }

  it("its late mint is revoked, and it answers with the card the recovery finished", async () => {
    const { request, cardId, recovered } = await overrun();
    stalled!.resume();
    const res = await request;
    expect(res.status).toBe(201);
    expect(res.body.id).toBe(cardId);
    expect((await s.processor.cards(cardId)).sort()).toEqual(["active", "canceled"]);
    const [row] = await s.query("SELECT status, processor_card_id, hold_status FROM cards WHERE id = ?", [cardId]);
    expect(row).toMatchObject({ status: "OPEN", processor_card_id: recovered, hold_status: "OPEN" });
    expect((await s.processor.holds(cardId)).map((h) => h.status)).toEqual(["requires_capture"]);
  });

  it("its failed mint leaves the finished card and its hold alone", async () => {
    const { request, cardId, recovered } = await overrun();
    s.processor.fail("mint", "fail");
    try {
      stalled!.resume();
      const res = await request;
      // Stripe's adapter reads the card back after a 5xx and finds the recovered one: the request has it.
      if (processor === "stripe") expect(res.body.id).toBe(cardId);
      else expectError(res, 502, "processor_error");
    } finally {
      s.processor.clear();
    }
    const [row] = await s.query("SELECT status, processor_card_id, hold_status FROM cards WHERE id = ?", [cardId]);
    expect(row).toMatchObject({ status: "OPEN", processor_card_id: recovered, hold_status: "OPEN" });
    expect((await s.processor.holds(cardId)).map((h) => h.status)).toEqual(["requires_capture"]);
    expect(await s.processor.cards(cardId)).toEqual(["active"]);
    // The client's retry gets the card.
    const retry = await s.request("POST", "/v1/cards", { key, body: { amount_cents: 700 }, headers: { "idempotency-key": "overrun" } });
    expect(retry.status).toBe(201);
    expect(retry.body.id).toBe(cardId);
  });

  it("its mint whose answer is lost is found and revoked: the finished card stays the only live one", async () => {
    const { request, cardId, recovered } = await overrun();
    s.processor.lose("mint");
    try {
      stalled!.resume();
      const res = await request;
      expectError(res, 502, "processor_error");
    } finally {
      s.processor.clear();
    }
    const [row] = await s.query("SELECT status, processor_card_id, hold_status FROM cards WHERE id = ?", [cardId]);
    expect(row).toMatchObject({ status: "OPEN", processor_card_id: recovered, hold_status: "OPEN" });
    expect((await s.processor.cards(cardId)).sort()).toEqual(["active", "canceled"]);
    expect((await s.processor.holds(cardId)).map((h) => h.status)).toEqual(["requires_capture"]);
  });

  it("a request whose hold call outlives its lease cannot fail the card the recovery pass is still finishing", async () => {
    // The request's hold call hangs (until its timeout); the recovery pass takes the card over meanwhile.
    s.processor.fail("hold", "hang");
    const request = s.request("POST", "/v1/cards", { key, body: { amount_cents: 700 }, headers: { "idempotency-key": "hung-hold" } });
    // Only once the request's hold call hangs at the processor may the fault go (on Stripe the
    // customer is made first: a card row in CREATING does not mean its hold call was sent).
    await vi.waitFor(() => expect(s.processor.calls("hold")).toBe(1), { timeout: 10_000, interval: 10 });
    s.processor.clear();
    const [{ id: cardId }] = await s.query("SELECT id FROM cards WHERE status = 'CREATING'");
    await s.query("UPDATE cards SET lease_until = 1 WHERE id = ?", [cardId]);
    // The pass places its own hold, then stalls (afterHold) before its mint: mid-way when the request gives up.
    const pass = s.app.services.maintenance.run();
    await paused;
    expect(stalled!.cardId).toBe(cardId);
    expectError(await request, 502, "processor_error");
    const [during] = await s.query("SELECT status, revoked_at FROM cards WHERE id = ?", [cardId]);
    expect(during).toMatchObject({ status: "CREATING", revoked_at: null });
    stalled!.resume();
    await pass;
    const [row] = await s.query("SELECT status, hold_status, hold_id FROM cards WHERE id = ?", [cardId]);
    expect(row).toMatchObject({ status: "OPEN", hold_status: "OPEN" });
    expect((await s.processor.hold(row.hold_id))!.status).toBe("requires_capture");
    expect(await s.processor.cards(cardId)).toEqual(["active"]);
    // The client's retry gets the card.
    const retry = await s.request("POST", "/v1/cards", { key, body: { amount_cents: 700 }, headers: { "idempotency-key": "hung-hold" } });
    expect(retry.status).toBe(201);
    expect(retry.body.id).toBe(cardId);
  });

  it("the client's retry that takes over its key answers with its card, even with approval required since: no approval too", async () => {
    const { request, cardId } = await overrunWithRetry();
    stalled!.resume();
    expect((await request).body.id).toBe(cardId);
  });

  it("its hold placed after the recovery pass finished the card, its answer lost, is found and cancelled", async () => {
    await s.close();
    let resume!: () => void;
    let reached!: (cardId: string) => void;
    const atHold = new Promise<string>((r) => (reached = r));
    let first = true;
    s = await startServer(
      { PROCESSOR_TIMEOUT_MS: "1000" },
      {
        // The first attempt stalls before its hold; the recovery pass's goes straight on.
        beforeHold: (cardId) => {
          if (!first) return Promise.resolve();
          first = false;
          reached(cardId);
          return new Promise<void>((r) => (resume = r));
        },
      },
    );
    key = await (await s.newAccount()).key();
    const request = s.request("POST", "/v1/cards", { key, body: { amount_cents: 700 }, headers: { "idempotency-key": "late-hold" } });
    const cardId = await atHold;
    await s.query("UPDATE cards SET lease_until = 1 WHERE id = ?", [cardId]);
    await s.app.services.maintenance.run();
    const [recovered] = await s.query("SELECT status, hold_id FROM cards WHERE id = ?", [cardId]);
    expect(recovered.status).toBe("OPEN");
    s.processor.lose("hold");
    try {
      resume();
      expectError(await request, 502, "processor_error");
    } finally {
      s.processor.clear();
    }
    const [row] = await s.query("SELECT status, hold_status, hold_id FROM cards WHERE id = ?", [cardId]);
    expect(row).toMatchObject({ status: "OPEN", hold_status: "OPEN", hold_id: recovered.hold_id });
    const holds = await s.processor.holds(cardId);
    expect(holds.map((h) => h.status).sort()).toEqual(["canceled", "requires_capture"]);
    expect((await s.processor.hold(recovered.hold_id))!.status).toBe("requires_capture");
    expect(await s.processor.cards(cardId)).toEqual(["active"]);
  });
});
