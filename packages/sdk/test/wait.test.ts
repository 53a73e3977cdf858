import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DecisionTimeoutError, NotFoundError, UserAbortError, type Cardctl } from "../src/index.js";
import { clientFor, startServer, type TestServer } from "./helpers.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A client on a fresh account whose default policy requires approval. */
async function approvalClient(s: TestServer): Promise<Cardctl> {
  const c = clientFor(s, { apiKey: await (await s.newAccount()).key() });
  await c.policies.updateDefault({ approval_required: true });
  return c;
}

describe("waitForDecision / createAndWait (approvals live a day)", () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startServer();
  });
  afterAll(() => s?.close());

  it("approve: resolves APPROVED with the card (GET /v1/cards/{card_id}, ephemeral key included)", async () => {
    const c = await approvalClient(s);
    const created = await c.cards.create({ amount_cents: 1500, purpose: "books" });
    if (created.status !== "PENDING_APPROVAL") throw new Error("expected a pending approval");
    const decision = c.approvals.waitForDecision(created.approval_id, { timeoutMs: 20_000, pollIntervalMs: 50 });
    await sleep(200);
    const issued = await c.approvals.approve(created.approval_id);
    const d = await decision;
    expect(d.status).toBe("APPROVED");
    if (d.status !== "APPROVED") return;
    expect(d.card).toMatchObject({ id: issued.id, status: "OPEN", amount_cents: 1500, purpose: "books" });
    expect(d.card.ephemeral_key_secret).toEqual(expect.any(String));
    expect(d.approval).toMatchObject({ id: created.approval_id, status: "APPROVED", card_id: issued.id });
  });

  it("reject: resolves REJECTED with the reason", async () => {
    const c = await approvalClient(s);
    const created = await c.cards.create({ amount_cents: 900 });
    if (created.status !== "PENDING_APPROVAL") throw new Error("expected a pending approval");
    const decision = c.approvals.waitForDecision(created.approval_id, { pollIntervalMs: 50 });
    await sleep(150);
    await c.approvals.reject(created.approval_id, { reason: "too pricey" });
    expect(await decision).toEqual({
      status: "REJECTED",
      approval: expect.objectContaining({ id: created.approval_id, status: "REJECTED", reason: "too pricey" }),
    });
  });

  it("createAndWait: waits for a human when the policy asks, and returns the card directly when it does not", async () => {
    const c = await approvalClient(s);
    const approver = (async () => {
      for (let i = 0; i < 200; i++) {
        const [pending] = (await c.approvals.list()).data;
        if (pending) return c.approvals.approve(pending.id);
        await sleep(25);
      }
      throw new Error("no approval request showed up");
    })();
    const r = await c.cards.createAndWait({ amount_cents: 777, agent_id: "agent-7" }, { pollIntervalMs: 50, timeoutMs: 20_000 });
    const issued = await approver;
    expect(r).toMatchObject({ status: "APPROVED", card: { id: issued.id, agent_id: "agent-7" }, approval: { status: "APPROVED" } });

    await c.policies.updateDefault({ approval_required: false });
    const direct = await c.cards.createAndWait({ amount_cents: 100 });
    expect(direct.status).toBe("APPROVED");
    if (direct.status !== "APPROVED") return;
    expect(direct.approval).toBeNull();
    expect(direct.card).toMatchObject({ status: "OPEN", amount_cents: 100, ephemeral_key_secret: expect.any(String) });
  });

  it("times out with DecisionTimeoutError, cancels through its signal, and 404s an unknown approval", async () => {
    const c = await approvalClient(s);
    const created = await c.cards.create({ amount_cents: 300 });
    if (created.status !== "PENDING_APPROVAL") throw new Error("expected a pending approval");
    const t0 = Date.now();
    const err = await c.approvals.waitForDecision(created.approval_id, { timeoutMs: 400, pollIntervalMs: 100 }).catch((e) => e);
    expect(err).toBeInstanceOf(DecisionTimeoutError);
    expect(err.approvalId).toBe(created.approval_id);
    expect(err.details).toEqual({ approval_id: created.approval_id });
    expect(Date.now() - t0).toBeLessThan(2000);

    const ac = new AbortController();
    setTimeout(() => ac.abort(), 200);
    const aborted = await c.approvals.waitForDecision(created.approval_id, { signal: ac.signal }).catch((e) => e);
    expect(aborted).toBeInstanceOf(UserAbortError);
    // Named, so a caller that only logs the error can wait for it again.
    expect(aborted.details).toEqual({ approval_id: created.approval_id });

    await expect(c.approvals.waitForDecision("appr_doesnotexist")).rejects.toBeInstanceOf(NotFoundError);
    // Still pending after all that.
    expect((await c.approvals.list()).data.map((a) => a.id)).toEqual([created.approval_id]);
  });
});

describe("approvals.decision", () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startServer();
  });
  afterAll(() => s?.close());

  it("PENDING, APPROVED with its card (PENDING while that card is being created), REJECTED; 404 for an unknown id", async () => {
    const c = await approvalClient(s);
    const one = await c.cards.create({ amount_cents: 610 });
    const two = await c.cards.create({ amount_cents: 620 });
    if (one.status !== "PENDING_APPROVAL" || two.status !== "PENDING_APPROVAL") throw new Error("expected pending approvals");
    expect(await c.approvals.decision(one.approval_id)).toEqual({ status: "PENDING", approval: expect.objectContaining({ id: one.approval_id, status: "PENDING" }) });

    const card = await c.approvals.approve(one.approval_id);
    // As between the approval's claim and its card's opening (the hold and mint under way).
    await s.query("UPDATE cards SET status = 'CREATING' WHERE id = ?", [card.id]);
    try {
      expect(await c.approvals.decision(one.approval_id)).toEqual({ status: "PENDING", approval: expect.objectContaining({ status: "APPROVED", card_id: card.id }) });
    } finally {
      await s.query("UPDATE cards SET status = 'OPEN' WHERE id = ?", [card.id]);
    }
    const approved = await c.approvals.decision(one.approval_id);
    expect(approved).toMatchObject({ status: "APPROVED", approval: { id: one.approval_id }, card: { id: card.id, status: "OPEN", ephemeral_key_secret: expect.any(String) } });

    await c.approvals.reject(two.approval_id, { reason: "no" });
    expect(await c.approvals.decision(two.approval_id)).toEqual({ status: "REJECTED", approval: expect.objectContaining({ status: "REJECTED", reason: "no" }) });
    await expect(c.approvals.decision("appr_doesnotexist")).rejects.toBeInstanceOf(NotFoundError);
  });
});

describe("waitForDecision with APPROVAL_TTL_SECONDS=1", () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startServer({ APPROVAL_TTL_SECONDS: "1" });
  });
  afterAll(() => s?.close());

  it("expiry: resolves EXPIRED once the approval outlives its TTL (and createAndWait too)", async () => {
    const c = await approvalClient(s);
    const created = await c.cards.create({ amount_cents: 400 });
    if (created.status !== "PENDING_APPROVAL") throw new Error("expected a pending approval");
    const d = await c.approvals.waitForDecision(created.approval_id, { timeoutMs: 10_000, pollIntervalMs: 100 });
    expect(d).toEqual({ status: "EXPIRED", approval: expect.objectContaining({ id: created.approval_id, status: "EXPIRED" }) });
    expect(Date.now()).toBeGreaterThanOrEqual(Date.parse(created.expires_at));

    const r = await c.cards.createAndWait({ amount_cents: 500 }, { timeoutMs: 10_000 });
    expect(r.status).toBe("EXPIRED");
    expect((await c.cards.list()).data).toEqual([]);
  });
});
