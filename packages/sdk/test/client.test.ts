import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import {
  APIConnectionError,
  AuthenticationError,
  Cardctl,
  CardctlError,
  ConflictError,
  NotFoundError,
  Page,
  PaymentDeclinedError,
  PermissionError,
  PolicyViolationError,
  SetupRequiredError,
  UserAbortError,
  ValidationError,
  schemas,
  type Card,
} from "../src/index.js";
import { clientFor, closedPort, recordingFetch, startServer, type TestServer } from "./helpers.js";

describe("Cardctl against the real server", () => {
  let s: TestServer;
  let client: Cardctl;
  beforeAll(async () => {
    s = await startServer();
    client = clientFor(s);
  });
  afterAll(() => s?.close());

  /** A fresh account (setup complete) and a client with its full test key. */
  async function fresh(o: Parameters<TestServer["newAccount"]>[0] = {}, role: "full" | "agent" = "full") {
    const account = await s.newAccount(o);
    return clientFor(s, { apiKey: await account.key("test", role) });
  }

  it("balance.retrieve, policies.retrieveDefault and policies.updateDefault", async () => {
    const c = await fresh();
    expect(await c.balance.retrieve()).toEqual({
      held_cents: 0,
      open_cards: 0,
      pending_approvals: 0,
      max_per_card_cents: 50000,
      approval_required: false,
      setup_complete: true,
      uncollected_cents: 0,
    });
    expect(await c.policies.retrieveDefault()).toEqual({ approval_required: false, max_amount_cents: 50000 });
    expect(await c.policies.updateDefault({ max_amount_cents: 3000 })).toEqual({ approval_required: false, max_amount_cents: 3000 });
    expect(await c.policies.retrieveDefault()).toEqual({ approval_required: false, max_amount_cents: 3000 });
    expect((await c.balance.retrieve()).max_per_card_cents).toBe(3000);
  });

  it("policies.check: the dry run agrees with cards.create, writes nothing, and denial is a result", async () => {
    const c = await fresh();
    expect(await c.policies.check({ amount_cents: 1500, agent_id: "agent-1" })).toEqual({
      decision: "issue",
      reasons: [],
      effective_policy: { approval_required: false, max_amount_cents: 50000 },
    });
    const asked = await c.policies.check({ amount_cents: 1500, policy_override: { approval_required: true } });
    expect(asked.decision).toBe("approval_required");
    expect(asked.reasons).toEqual([expect.objectContaining({ code: "approval_required", details: { source: "policy_override" } })]);
    await c.policies.updateDefault({ max_amount_cents: 1000 });
    const denied = await c.policies.check({ amount_cents: 5000 }, { idempotencyKey: "same-key" });
    expect(denied).toMatchObject({ decision: "denied", effective_policy: { approval_required: false, max_amount_cents: 1000 } });
    const [reason] = denied.reasons;
    if (reason?.code !== "amount_over_max") throw new Error(`expected amount_over_max, got ${JSON.stringify(reason)}`);
    expect(reason.details).toEqual({ max_amount_cents: 1000, requested: 5000 });
    // The same Idempotency-Key (the SDK sends one on every POST) answers afresh, not from a store.
    await c.policies.updateDefault({ max_amount_cents: 6000 });
    expect((await c.policies.check({ amount_cents: 5000 }, { idempotencyKey: "same-key" })).decision).toBe("issue");
    await c.policies.updateDefault({ max_amount_cents: 1000 });
    // Nothing was made by the checks; creation then does what the check said.
    expect(await c.balance.retrieve()).toMatchObject({ held_cents: 0, open_cards: 0, pending_approvals: 0 });
    await expect(c.cards.create({ amount_cents: 5000 })).rejects.toBeInstanceOf(PolicyViolationError);

    const unset = await fresh({ kyb: false });
    const setup = await unset.policies.check({ amount_cents: 100 });
    expect(setup.decision).toBe("denied");
    expect(setup.reasons).toEqual([expect.objectContaining({ code: "setup_required", details: { missing: ["kyb"], setup_url: expect.stringMatching(/\/setup$/) } })]);

    const agent = await fresh({}, "agent");
    expect((await agent.policies.check({ amount_cents: 100 })).decision).toBe("issue");
    await expect(c.policies.check({ amount_cents: 0 })).rejects.toBeInstanceOf(ValidationError);
  });

  it("cards.create (201), get with the ephemeral key, close (idempotent), and the balance follows", async () => {
    const c = await fresh();
    const created = await c.cards.create({ amount_cents: 1234, agent_id: "agent-1", purpose: "API credits" });
    if (created.status === "PENDING_APPROVAL") throw new Error("expected an issued card");
    expect(created).toMatchObject({ status: "OPEN", spending_limit_cents: 1234, remaining_cents: 1234, agent_id: "agent-1" });
    expect(created.id).toMatch(/^card_/);
    expect(created.last_four).toMatch(/^\d{4}$/);
    expect(created.expiration).toMatch(/^\d{2}\/\d{2}$/);
    expect(await c.balance.retrieve()).toMatchObject({ held_cents: 1234, open_cards: 1 });

    const detail = await c.cards.get(created.id);
    expect(detail).toMatchObject({ id: created.id, status: "OPEN", amount_cents: 1234, purpose: "API credits", closed_at: null });
    expect(detail.ephemeral_key_secret).toEqual(expect.any(String));
    expect(detail.processor_card_id).toEqual(expect.any(String));
    expect(JSON.stringify(detail)).not.toMatch(/"(pan|number|cvc|cvv)"/i);

    expect(await c.cards.close(created.id)).toEqual({ ok: true, status: "CLOSED" });
    expect(await c.cards.close(created.id)).toEqual({ ok: true, status: "CLOSED" });
    const closed = await c.cards.get(created.id);
    expect(closed.status).toBe("CLOSED");
    expect(closed.closed_at).toEqual(expect.any(String));
    expect(await c.balance.retrieve()).toMatchObject({ held_cents: 0, open_cards: 0 });
  });

  it("cards.list: an awaitable page, and for-await across pages (has_more / starting_after)", async () => {
    const c = await fresh();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const r = await c.cards.create({ amount_cents: 100 + i, agent_id: i % 2 ? "odd" : "even" });
      if (r.status !== "PENDING_APPROVAL") ids.unshift(r.id); // newest first
    }
    const page = await c.cards.list({ limit: 2 });
    expect(page).toBeInstanceOf(Page);
    expect(page.data.map((x) => x.id)).toEqual(ids.slice(0, 2));
    expect(page.has_more).toBe(true);
    const second = await page.getNextPage();
    expect(second?.data.map((x) => x.id)).toEqual(ids.slice(2, 4));

    const walked: Card[] = [];
    for await (const card of c.cards.list({ limit: 2 })) walked.push(card);
    expect(walked.map((x) => x.id)).toEqual(ids);

    // filters travel as query parameters and paging keeps them
    const odd: string[] = [];
    for await (const card of c.cards.list({ agent_id: "odd", limit: 1 })) odd.push(card.agent_id!);
    expect(odd).toEqual(["odd", "odd"]);
    expect(await c.cards.list({ status: "CLOSED" }).then((p) => p.data)).toEqual([]);
    expect(await c.cards.list({ status: "OPEN" }).toArray()).toHaveLength(5);
  });

  it("approvals: PENDING_APPROVAL on create, list, approve (card), reject, and 409 when not pending", async () => {
    const c = await fresh();
    await c.policies.updateDefault({ approval_required: true });
    const a = await c.cards.create({ amount_cents: 700, agent_id: "bot", purpose: "domain" });
    expect(a.status).toBe("PENDING_APPROVAL");
    if (a.status !== "PENDING_APPROVAL") return;
    expect(a.approval_id).toMatch(/^appr_/);
    expect(Date.parse(a.expires_at)).toBeGreaterThan(Date.now());
    const b = await c.cards.create({ amount_cents: 800, policy_override: { max_amount_cents: 900 } });
    if (b.status !== "PENDING_APPROVAL") throw new Error("expected a pending approval");

    const pending = await c.approvals.list();
    expect(pending.data.map((x) => x.id)).toEqual([b.approval_id, a.approval_id]);
    expect(pending.data[1]).toMatchObject({ amount_cents: 700, agent_id: "bot", purpose: "domain", status: "PENDING" });
    expect((await c.balance.retrieve()).pending_approvals).toBe(2);

    const card = await c.approvals.approve(a.approval_id);
    expect(card).toMatchObject({ status: "OPEN", spending_limit_cents: 700 });
    expect(await c.approvals.reject(b.approval_id, { reason: "not today" })).toEqual({ ok: true, status: "REJECTED" });

    const approved = await c.approvals.list({ status: "APPROVED" });
    expect(approved.data).toEqual([expect.objectContaining({ id: a.approval_id, status: "APPROVED", card_id: card.id })]);
    expect(await c.approvals.retrieve(b.approval_id)).toMatchObject({ status: "REJECTED", reason: "not today" });
    const all: string[] = [];
    for await (const x of c.approvals.list({ status: "REJECTED", limit: 1 })) all.push(x.id);
    expect(all).toEqual([b.approval_id]);

    const err = await c.approvals.approve(b.approval_id).catch((e) => e);
    expect(err).toBeInstanceOf(ConflictError);
    expect(err).toMatchObject({ status: 409, code: "approval_not_pending", details: { status: "REJECTED" } });
    await expect(c.approvals.retrieve("appr_nope")).rejects.toBeInstanceOf(NotFoundError);
  });

  it("testHelpers.purchase makes a single-use card USED", async () => {
    const c = await fresh();
    const card = await c.cards.create({ amount_cents: 2000 });
    if (card.status === "PENDING_APPROVAL") throw new Error("expected a card");
    const r = await c.testHelpers.purchase(card.id, { amount_cents: 1500, merchant: "ACME" });
    expect(r).toMatchObject({ approved: true, decline_reason: null, amount_cents: 1500, card: { id: card.id, status: "USED" } });
    const again = await c.testHelpers.purchase(card.id, { amount_cents: 100 });
    expect(again.approved).toBe(false);
    expect((await c.cards.get(card.id)).status).toBe("USED");
  });

  it("maps every error to its class, with status, code, message, details and requestId", async () => {
    const bad = clientFor(s, { apiKey: "sk_test_thisisnotakey00000000000000000000" });
    const auth = await bad.balance.retrieve().catch((e) => e);
    expect(auth).toBeInstanceOf(AuthenticationError);
    expect(auth).toBeInstanceOf(CardctlError);
    expect(auth).toMatchObject({ status: 401, code: "unauthorized", name: "AuthenticationError" });
    expect(auth.requestId).toMatch(/^req_/);

    const setup = await (await fresh({ kyb: false, paymentMethod: null })).cards.create({ amount_cents: 100 }).catch((e) => e);
    expect(setup).toBeInstanceOf(SetupRequiredError);
    expect(setup).toBeInstanceOf(PermissionError);
    expect(setup.missing.sort()).toEqual(["kyb", "payment_method"]);
    expect(setup.setupUrl).toMatch(/^http:\/\/cardctl\.test\//);

    const declined = await (await fresh({ paymentMethod: "pm_card_decline" })).cards.create({ amount_cents: 100 }).catch((e) => e);
    expect(declined).toBeInstanceOf(PaymentDeclinedError);
    expect(declined).toMatchObject({ status: 402, code: "payment_method_declined", declineCode: expect.any(String) });

    const c = await fresh();
    await c.policies.updateDefault({ max_amount_cents: 1000 });
    const policy = await c.cards.create({ amount_cents: 5000 }).catch((e) => e);
    expect(policy).toBeInstanceOf(PolicyViolationError);
    expect(policy).toMatchObject({ status: 403, code: "policy_violation", maxAmountCents: 1000, requested: 5000 });

    const agent = await fresh({}, "agent");
    const forbidden = await agent.policies.updateDefault({ approval_required: false }).catch((e) => e);
    expect(forbidden).toBeInstanceOf(PermissionError);
    expect(forbidden).toMatchObject({ status: 403, code: "forbidden" });
    await expect(agent.approvals.approve("appr_x")).rejects.toMatchObject({ status: 403, code: "forbidden" });

    const missing = await c.cards.get("card_doesnotexist").catch((e) => e);
    expect(missing).toBeInstanceOf(NotFoundError);
    expect(missing).toMatchObject({ status: 404, code: "not_found" });
    await expect(c.cards.close("card_doesnotexist")).rejects.toBeInstanceOf(NotFoundError);

    const invalid = await c.cards.create({ amount_cents: 0 }).catch((e) => e);
    expect(invalid).toBeInstanceOf(ValidationError);
    expect(invalid).toMatchObject({ status: 400, code: "validation_error" });
    expect(invalid.details.issues).toEqual(expect.arrayContaining([expect.objectContaining({ path: expect.stringContaining("amount_cents") })]));
  });

  it("sends an Idempotency-Key on every POST: one given is honoured, a reused key with another body is 422", async () => {
    const c = await fresh();
    const a = await c.cards.create({ amount_cents: 300 }, { idempotencyKey: "order-42" });
    const b = await c.cards.create({ amount_cents: 300 }, { idempotencyKey: "order-42" });
    expect(b).toEqual(a);
    expect((await c.cards.list()).data).toHaveLength(1);
    const reused = await c.cards.create({ amount_cents: 301 }, { idempotencyKey: "order-42" }).catch((e) => e);
    expect(reused).toBeInstanceOf(ValidationError);
    expect(reused).toMatchObject({ status: 422, code: "idempotency_key_reused" });

    const { fetch, log } = recordingFetch();
    const rec = clientFor(s, { apiKey: s.apiKey, fetch });
    const card = await rec.cards.create({ amount_cents: 100 });
    if (card.status === "PENDING_APPROVAL") throw new Error("expected a card");
    await rec.cards.close(card.id);
    await rec.balance.retrieve();
    expect(log.map((x) => [x.method, x.idempotencyKey !== null])).toEqual([
      ["POST", true],
      ["POST", true],
      ["GET", false],
    ]);
    expect(log[0]!.idempotencyKey).not.toBe(log[1]!.idempotencyKey);
  });

  it("never retries other 4xx", async () => {
    const { fetch, log } = recordingFetch();
    const c = clientFor(s, { fetch, maxRetries: 5 });
    await expect(c.cards.get("card_nope")).rejects.toBeInstanceOf(NotFoundError);
    await expect(c.cards.create({ amount_cents: 999999 })).rejects.toBeInstanceOf(ValidationError);
    await expect(clientFor(s, { fetch, apiKey: "sk_test_nope000000000000000000000000000" }).balance.retrieve()).rejects.toBeInstanceOf(
      AuthenticationError,
    );
    expect(log.map((x) => x.status)).toEqual([404, 400, 401]);
  });

  it("cancels through AbortSignal and reports unreachable servers as APIConnectionError", async () => {
    const ac = new AbortController();
    ac.abort();
    await expect(client.balance.retrieve({ signal: ac.signal })).rejects.toBeInstanceOf(UserAbortError);

    const down = new Cardctl({ apiKey: s.apiKey, baseUrl: `http://127.0.0.1:${await closedPort()}`, maxRetries: 1 });
    const t0 = Date.now();
    const err = await down.balance.retrieve().catch((e) => e);
    expect(err).toBeInstanceOf(APIConnectionError);
    expect(err).toMatchObject({ code: "connection_error", status: undefined });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(200); // one backoff before the retry

    // An abort during the backoff wait ends the call at once.
    const ac2 = new AbortController();
    const slow = new Cardctl({ apiKey: s.apiKey, baseUrl: `http://127.0.0.1:${await closedPort()}`, maxRetries: 10 });
    setTimeout(() => ac2.abort(), 300);
    const t1 = Date.now();
    await expect(slow.balance.retrieve({ signal: ac2.signal })).rejects.toBeInstanceOf(UserAbortError);
    expect(Date.now() - t1).toBeLessThan(2000);
  });

  it("the card money lifecycle: test helpers play the network; authorizations and transactions list per card", async () => {
    const c = await fresh();
    const card = await c.cards.create({ amount_cents: 1000 });
    if (card.status === "PENDING_APPROVAL") throw new Error("expected a card");
    expect(card.expires_at).toMatch(/Z$/);
    const verification = await c.testHelpers.authorize(card.id, { amount_cents: 0 });
    expect(verification).toMatchObject({ approved: true, amount_cents: 0 });
    const auth = await c.testHelpers.authorize(card.id, { amount_cents: 600, merchant: { name: "Bookshop", country: "US" } });
    expect(auth).toMatchObject({ approved: true, status: "pending", merchant: { name: "Bookshop", category: null, country: "US" } });
    const txn = await c.testHelpers.capture(auth.id, { amount_cents: 1100 });
    expect(txn).toMatchObject({ type: "capture", amount_cents: 1100, authorization_id: auth.id });
    const refund = await c.testHelpers.refund(txn.id, { amount_cents: 100 });
    expect(refund).toMatchObject({ type: "refund", amount_cents: 100 });
    expect((await c.cards.get(card.id)).spent_cents).toBe(1000);
    const auths = await c.authorizations.list({ card_id: card.id }).toArray();
    expect(auths.map((a) => a.id)).toEqual([auth.id, verification.id]);
    const txns = await c.transactions.list({ card_id: card.id, limit: 1 }).toArray();
    expect(txns.map((t) => t.type)).toEqual(["refund", "capture"]);
    const other = await c.cards.create({ amount_cents: 300 });
    if (other.status === "PENDING_APPROVAL") throw new Error("expected a card");
    expect(await c.testHelpers.expireHold(other.id)).toMatchObject({ id: other.id, status: "CLOSED" });
    const third = await c.cards.create({ amount_cents: 300 });
    if (third.status === "PENDING_APPROVAL") throw new Error("expected a card");
    const back = await c.testHelpers.reverse((await c.testHelpers.authorize(third.id, { amount_cents: 300 })).id);
    expect(back.status).toBe("reversed");
    expect((await c.cards.get(third.id)).status).toBe("OPEN");
  });

  it("accepts a base URL ending in /v1 or a slash, and exports the contract's schemas", async () => {
    const c = new Cardctl({ apiKey: s.apiKey, baseUrl: `${s.url}/v1/` });
    expect(c.baseUrl).toBe(s.url);
    expect((await c.policies.retrieveDefault()).max_amount_cents).toEqual(expect.any(Number));
    expect(schemas.createCardInput.safeParse({ amount_cents: 100 }).success).toBe(true);
    const tool = z.toJSONSchema(schemas.createCardInput, { io: "input" }) as { properties: Record<string, { type?: string }> };
    expect(tool.properties.amount_cents).toMatchObject({ type: "integer", minimum: 1, maximum: 50000 });
    expect(() => new Cardctl({ apiKey: "" , baseUrl: s.url})).toThrow(CardctlError);
  });
});
