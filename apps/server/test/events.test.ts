import { randomToken, timeStampOf } from "@cardctl/api";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dbKind, expectError, processor, startServer, type TestServer } from "./harness.js";
import { guarded, ISO, LIST_CARD_KEYS, APPROVAL_KEYS, ownerSession } from "./helpers.js";
import { openStream, topSeq, writeEventAt } from "./sse.js";

/** What the harness's newAccount announces: its set-up (KYB, payment method, cardholder on Stripe), the keys it makes. */
const SETUP_EVENTS = ["account.kyb_updated", "account.payment_method_updated", "account.cardholder_updated", "api_key.created"];

/**
 * The event outbox (DESIGN 3.7): every state change of cards, approvals, the money lifecycle
 * (3.6), keys and the policy writes its event in the same transaction; GET /v1/events lists them
 * (scoped to the key's account and mode), and GET /v1/events/stream streams them live.
 */
describe(`events (${dbKind}, ${processor})`, () => {
  let s: TestServer;
  beforeAll(async () => {
    s = guarded(await startServer({ EVENT_STREAM_HEARTBEAT_MS: "200" }));
  });
  afterAll(() => s.close());

  /** A fresh account's full test key, and its helpers. */
  async function account() {
    const acct = await s.newAccount();
    const key = await acct.key();
    const post = async (path: string, body?: unknown) => (await s.request("POST", path, { key, body })).body;
    /** Every event of the account, oldest first (the API lists newest first), through the pages. */
    const allEvents = async (query = "") => {
      const all: any[] = [];
      let after = "";
      for (;;) {
        const page = (await s.request("GET", `/v1/events?limit=100${query}${after}`, { key })).body;
        all.push(...page.data);
        if (!page.has_more) return all.reverse();
        after = `&starting_after=${page.data[page.data.length - 1].id}`;
      }
    };
    /** The same without the events of the account's set-up (its payment method, its key). */
    const events = async (query = "") => (await allEvents(query)).filter((e) => !SETUP_EVENTS.includes(e.type));
    const types = async (query = "") => (await events(query)).map((e) => e.type);
    return { acct, key, post, allEvents, events, types };
  }

  it("card creation, purchase and settlement write their events, each with the resource as the API shows it", async () => {
    const a = await account();
    const card = await a.post("/v1/cards", { amount_cents: 1000, agent_id: "agent-7" });
    const [created] = await a.events();
    expect(Object.keys(created).sort()).toEqual(["actor", "created_at", "data", "id", "mode", "object", "type"]);
    expect(created).toMatchObject({ object: "event", type: "card.created", mode: "test", actor: { type: "api_key", id: expect.stringMatching(/^key_/) } });
    expect(created.id).toMatch(/^evt_[A-Za-z0-9]{24}$/);
    expect(created.created_at).toMatch(ISO);
    expect(Object.keys(created.data.object).sort()).toEqual([...LIST_CARD_KEYS].sort());
    expect(created.data.object).toEqual((await s.request("GET", "/v1/cards?limit=1", { key: a.key })).body.data[0]);

    const auth = await a.post(`/v1/test_helpers/cards/${card.id}/authorizations`, { amount_cents: 700, merchant: { name: "Shop" } });
    const txn = await a.post(`/v1/test_helpers/authorizations/${auth.id}/capture`, { amount_cents: 600 });
    expect(await a.types()).toEqual(["card.created", "authorization.approved", "card.used", "transaction.created", "hold.captured"]);
    const byType = Object.fromEntries((await a.events()).map((e) => [e.type, e]));
    expect(byType["authorization.approved"].data.object).toMatchObject({ id: auth.id, approved: true, amount_cents: 700, merchant: { name: "Shop" } });
    expect(byType["authorization.approved"].actor).toEqual({ type: "processor", id: null });
    expect(byType["card.used"].data.object).toMatchObject({ id: card.id, status: "USED", remaining_cents: 0 });
    expect(byType["transaction.created"].data.object).toEqual(txn);
    expect(byType["hold.captured"].data.object).toEqual({ card_id: card.id, amount_cents: 1000, captured_cents: 600, released_cents: 400, status: "captured" });

    const refund = await a.post(`/v1/test_helpers/transactions/${txn.id}/refund`, { amount_cents: 100 });
    const last = (await a.events()).at(-1);
    expect(last).toMatchObject({ type: "transaction.created", data: { object: { id: refund.id, type: "refund", amount_cents: 100 } } });
  });

  it("declines, reversals, closing and a lapsed hold: authorization.declined, card.reopened, card.closed, hold.released", async () => {
    const a = await account();
    const card = await a.post("/v1/cards", { amount_cents: 500 });
    await a.post(`/v1/test_helpers/cards/${card.id}/authorizations`, { amount_cents: 900 });
    const auth = await a.post(`/v1/test_helpers/cards/${card.id}/authorizations`, { amount_cents: 300 });
    await a.post(`/v1/test_helpers/authorizations/${auth.id}/reverse`);
    await a.post(`/v1/cards/${card.id}/close`);
    await a.post(`/v1/cards/${card.id}/close`); // idempotent: no second event
    expect(await a.types()).toEqual(["card.created", "authorization.declined", "authorization.approved", "card.used", "card.reopened", "card.closed", "hold.released"]);
    const events = await a.events();
    expect(events[1].data.object).toMatchObject({ approved: false, decline_reason: "amount_exceeds_remaining", amount_cents: 900 });
    expect(events[4].data.object).toMatchObject({ id: card.id, status: "OPEN", remaining_cents: 500 });
    expect(events[5]).toMatchObject({ data: { object: { id: card.id, status: "CLOSED" } }, actor: { type: "api_key" } });
    expect(events[6].data.object).toEqual({ card_id: card.id, amount_cents: 500, captured_cents: 0, released_cents: 500, status: "released" });

    const lapsing = await a.post("/v1/cards", { amount_cents: 200 });
    await a.post(`/v1/test_helpers/cards/${lapsing.id}/expire_hold`);
    const tail = (await a.events()).slice(-3);
    expect(tail.map((e) => e.type)).toEqual(["card.created", "card.closed", "hold.released"]);
    expect(tail[1]).toMatchObject({ actor: { type: "processor" }, data: { object: { id: lapsing.id, status: "CLOSED" } } });
    expect(tail[2]).toMatchObject({ actor: { type: "processor" }, data: { object: { card_id: lapsing.id, amount_cents: 200, captured_cents: 0, released_cents: 200 } } });
  });

  it("a closed card's hold that lapses before its release (the processor failed the cancel): hold.released once, the processor's", async () => {
    const a = await account();
    const card = await a.post("/v1/cards", { amount_cents: 300 });
    s.processor.fail("cancel", "fail");
    try {
      expectError(await s.request("POST", `/v1/cards/${card.id}/close`, { key: a.key }), 502, "processor_error");
    } finally {
      s.processor.clear();
    }
    expect(await a.types()).toEqual(["card.created", "card.closed"]);
    await a.post(`/v1/test_helpers/cards/${card.id}/expire_hold`);
    await s.app.services.maintenance.run(); // the recovery pass finds the hold gone: nothing more to release or announce
    const events = await a.events();
    expect(events.map((e) => e.type)).toEqual(["card.created", "card.closed", "hold.released"]);
    expect(events[2]).toMatchObject({ actor: { type: "processor" }, data: { object: { card_id: card.id, captured_cents: 0, released_cents: 300, status: "released" } } });
    expect((await s.request("GET", "/v1/balance", { key: a.key })).body.held_cents).toBe(0);
  });

  it("an expired card: card.expired (the system's), then its hold released", async () => {
    const a = await account();
    const card = await a.post("/v1/cards", { amount_cents: 400 });
    await s.query("UPDATE cards SET expires_at = ? WHERE id = ?", [Date.now() - 1, card.id]);
    await s.app.services.maintenance.run();
    const events = await a.events();
    expect(events.map((e) => e.type)).toEqual(["card.created", "card.expired", "hold.released"]);
    expect(events[1]).toMatchObject({ actor: { type: "system", id: null }, data: { object: { id: card.id, status: "CLOSED" } } });
    // The pass again: nothing changes, nothing is announced twice.
    await s.app.services.maintenance.run();
    expect(await a.types()).toHaveLength(3);
  });

  it("approvals: created, approved (with its card), rejected and expired", async () => {
    const a = await account();
    const ask = (amount: number) => a.post("/v1/cards", { amount_cents: amount, policy_override: { approval_required: true } });
    const one = await ask(100);
    const two = await ask(200);
    const three = await ask(300);
    const card = await a.post(`/v1/approvals/${one.approval_id}/approve`);
    await a.post(`/v1/approvals/${two.approval_id}/reject`, { reason: "no" });
    expectError(await s.request("POST", `/v1/approvals/${two.approval_id}/reject`, { key: a.key, body: {} }), 409, "approval_not_pending");
    await s.query("UPDATE approvals SET expires_at = ? WHERE id = ?", [Date.now() - 1, three.approval_id]);
    await s.request("GET", "/v1/approvals", { key: a.key }); // expiry is applied on reads
    await s.app.services.maintenance.run(); // and by the sweep, which finds nothing left
    const events = await a.events();
    expect(events.map((e) => [e.type, e.data.object.id])).toEqual([
      ["approval.created", one.approval_id],
      ["approval.created", two.approval_id],
      ["approval.created", three.approval_id],
      ["approval.approved", one.approval_id],
      ["card.created", card.id],
      ["approval.rejected", two.approval_id],
      ["approval.expired", three.approval_id],
    ]);
    for (const e of events.filter((e) => e.type.startsWith("approval."))) expect(Object.keys(e.data.object).sort()).toEqual([...APPROVAL_KEYS].sort());
    expect(events[0].data.object).toMatchObject({ status: "PENDING", amount_cents: 100 });
    expect(events[3].data.object).toMatchObject({ status: "APPROVED", card_id: card.id });
    expect(events[5].data.object).toMatchObject({ status: "REJECTED", reason: "no" });
    expect(events[6]).toMatchObject({ actor: { type: "system" }, data: { object: { status: "EXPIRED" } } });
  });

  it("an issuance that fails announces no card and no approval decision", async () => {
    const a = await account();
    const pending = await a.post("/v1/cards", { amount_cents: 100, policy_override: { approval_required: true } });
    s.processor.fail("mint", "fail");
    try {
      expectError(await s.request("POST", "/v1/cards", { key: a.key, body: { amount_cents: 100 } }), 502, "processor_error");
      expectError(await s.request("POST", `/v1/approvals/${pending.approval_id}/approve`, { key: a.key }), 502, "processor_error");
    } finally {
      s.processor.clear();
    }
    expect(await a.types()).toEqual(["approval.created"]);
  });

  it("uncollected money and payments that need an operator are announced", async () => {
    const a = await account();
    const card = await a.post("/v1/cards", { amount_cents: 400 });
    const auth = await a.post(`/v1/test_helpers/cards/${card.id}/authorizations`, { amount_cents: 400 });
    s.processor.fail("charge", "decline");
    try {
      await a.post(`/v1/test_helpers/authorizations/${auth.id}/capture`, { amount_cents: 650 });
    } finally {
      s.processor.clear();
    }
    const uncollected = (await a.events("&type=payment.uncollected"))[0];
    expect(uncollected).toMatchObject({ actor: { type: "system" }, data: { object: { card_id: card.id, kind: "charge", amount_cents: 250, status: "uncollected" } } });

    const other = await a.post("/v1/cards", { amount_cents: 300 });
    const auth2 = await a.post(`/v1/test_helpers/cards/${other.id}/authorizations`, { amount_cents: 300 });
    s.processor.fail("capture", "fail");
    try {
      await a.post(`/v1/test_helpers/authorizations/${auth2.id}/capture`);
      await s.query("UPDATE payments SET attempts = 8, next_attempt_at = 0 WHERE card_id = ?", [other.id]);
      await s.app.services.maintenance.run();
    } finally {
      s.processor.clear();
    }
    const attention = await a.events("&type=processor.attention_needed");
    expect(attention).toHaveLength(1);
    expect(attention[0].data.object).toMatchObject({ card_id: other.id, kind: "hold_capture", status: "attention" });
  });

  it("a card whose processor follow-up keeps failing is announced as needing attention, once", async () => {
    const a = await account();
    const card = await a.post("/v1/cards", { amount_cents: 300 });
    s.processor.fail("revoke", "fail");
    try {
      expectError(await s.request("POST", `/v1/cards/${card.id}/close`, { key: a.key }), 502, "processor_error");
      await s.query("UPDATE cards SET recovery_attempts = 7, recovery_next_at = NULL WHERE id = ?", [card.id]);
      await s.app.services.maintenance.run();
      await s.app.services.maintenance.run();
    } finally {
      s.processor.clear();
    }
    const attention = await a.events("&type=processor.attention_needed");
    expect(attention.map((e) => e.data.object)).toMatchObject([{ id: card.id, status: "CLOSED", recovery_attempts: 8 }]);
  });

  it("racing closes and purchases announce each transition once, and only the one that happened", async () => {
    const a = await account();
    for (let round = 0; round < 3; round++) {
      const card = await a.post("/v1/cards", { amount_cents: 500 });
      await Promise.all([
        ...Array.from({ length: 4 }, () => s.request("POST", `/v1/cards/${card.id}/close`, { key: a.key })),
        ...Array.from({ length: 4 }, () => s.request("POST", `/v1/test_helpers/cards/${card.id}/authorizations`, { key: a.key, body: { amount_cents: 200 } })),
      ]);
      const final = (await s.request("GET", "/v1/cards?limit=1", { key: a.key })).body.data[0];
      const mine = (await a.events()).filter((e) => [e.data.object.id, e.data.object.card_id].includes(card.id));
      const count = (type: string) => mine.filter((e) => e.type === type).length;
      expect(count("card.created")).toBe(1);
      expect(count("authorization.approved") + count("authorization.declined")).toBe(4);
      if (final.status === "USED") {
        expect([count("card.used"), count("authorization.approved"), count("card.closed")]).toEqual([1, 1, 0]);
      } else {
        expect(final.status).toBe("CLOSED");
        expect([count("card.used"), count("authorization.approved"), count("card.closed"), count("hold.released")]).toEqual([0, 0, 1, 1]);
      }
    }
  });

  it("keys and the policy: api_key.created, api_key.revoked, policy.updated", async () => {
    const a = await account();
    const agentKey = (await s.admin("POST", `/accounts/${a.acct.id}/keys`, { mode: "test", role: "agent", name: "bot" })).body;
    await s.admin("POST", `/keys/${agentKey.id}/revoke`);
    await s.request("PUT", "/v1/policies/default", { key: a.key, body: { max_amount_cents: 1234 } });
    const events = (await a.allEvents()).filter((e) => !e.type.startsWith("account."));
    // The first key (made by the account's set-up) is announced too.
    expect(events.map((e) => e.type)).toEqual(["api_key.created", "api_key.created", "api_key.revoked", "policy.updated"]);
    expect(events[1]).toMatchObject({ actor: { type: "system" }, data: { object: { id: agentKey.id, role: "agent", name: "bot", revoked_at: null } } });
    expect(JSON.stringify(events)).not.toContain(agentKey.secret);
    expect(events[2].data.object).toMatchObject({ id: agentKey.id, revoked_at: expect.stringMatching(ISO) });
    expect(events[3]).toMatchObject({ actor: { type: "api_key" }, data: { object: { approval_required: false, max_amount_cents: 1234 } } });
  });

  // The Setup page's test cards are the simulated processor's; on Stripe its save is checked in dashboard-setup.test.ts.
  it.skipIf(processor === "stripe")("the payment method: account.payment_method_updated in both modes, the operator API's by the system, the Setup page's by the owner", async () => {
    const a = await account();
    const live = await a.acct.key("live");
    const changes = async (key: string) => (await s.request("GET", "/v1/events?type=account.payment_method_updated", { key })).body.data as any[];
    // The account's set-up saved one through the operator API: the system's, in each mode, with the set-up of that mode.
    const [seeded] = await changes(a.key);
    expect(seeded).toMatchObject({ mode: "test", actor: { type: "system", id: null } });
    expect(seeded.data.object).toMatchObject({ account_id: a.acct.id, mode: "test", payment_method: "pm_card_visa", setup_complete: true, missing: [] });
    expect((await changes(live))[0]).toMatchObject({ mode: "live", actor: { type: "system" }, data: { object: { account_id: a.acct.id, mode: "live", payment_method: "pm_card_visa" } } });

    // Removed by the operator: announced too.
    expect((await s.admin("POST", `/accounts/${a.acct.id}/payment_method`, { payment_method: null })).status).toBe(200);
    expect((await changes(a.key))[0]).toMatchObject({
      actor: { type: "system", id: null },
      data: { object: { payment_method: null, setup_complete: false, missing: ["payment_method"] } },
    });

    // The owner picks a test card on the Setup page: the owner is the actor, and the object is what the page reads in each mode.
    const o = await ownerSession(s, a.acct.id, "payer@events.example");
    const saved = await o.mutation("setup.saveTestCard", { payment_method: "pm_card_decline" });
    expect(saved.status).toBe(200);
    const [test] = await changes(a.key);
    expect(test).toMatchObject({ mode: "test", actor: { type: "owner", id: o.owner.id } });
    expect(test.data.object).toEqual(saved.body.result.data);
    expect(test.data.object).toEqual((await o.query("setup.status")).body.result.data);
    const [inLive] = await changes(live);
    expect(inLive).toMatchObject({ mode: "live", actor: { type: "owner", id: o.owner.id } });
    expect(inLive.data.object).toEqual((await o.query("setup.status", undefined, "live")).body.result.data);
    expect(inLive.data.object).toMatchObject({ mode: "live", payment_method: "pm_card_decline" });
    expect(await changes(a.key)).toHaveLength(3);
    expect(await changes(live)).toHaveLength(3);
    // A refused change writes nothing.
    expect((await o.mutation("setup.saveTestCard", { payment_method: "pm_other" })).status).toBe(400);
    expect(await changes(a.key)).toHaveLength(3);
  });

  it("the operator's KYB and cardholder changes: account.kyb_updated and account.cardholder_updated in both modes, by the system, no tax id", async () => {
    const acct = await s.newAccount({ kyb: false, cardholder: null });
    const key = await acct.key();
    const live = await acct.key("live");
    const ofType = async (type: string, k = key) => (await s.request("GET", `/v1/events?type=${type}`, { key: k })).body.data as any[];
    expect(await ofType("account.kyb_updated")).toEqual([]);

    expect((await s.admin("POST", `/accounts/${acct.id}/kyb`, { verified: true })).status).toBe(200);
    const [verified] = await ofType("account.kyb_updated");
    expect(verified).toMatchObject({ mode: "test", actor: { type: "system", id: null }, data: { object: { account_id: acct.id, mode: "test", kyb_verified: true } } });
    expect((await ofType("account.kyb_updated", live))[0].data.object).toMatchObject({ mode: "live", kyb_verified: true });
    // Verified again: nothing changed, nothing announced.
    expect((await s.admin("POST", `/accounts/${acct.id}/kyb`, { verified: true })).status).toBe(200);
    expect(await ofType("account.kyb_updated")).toHaveLength(1);
    expect((await s.admin("POST", `/accounts/${acct.id}/kyb`, { verified: false })).status).toBe(200);
    const [unverified] = await ofType("account.kyb_updated");
    expect(unverified.data.object).toMatchObject({ kyb_verified: false, setup_complete: false, missing: expect.arrayContaining(["kyb"]) });
    expect(await ofType("account.kyb_updated")).toHaveLength(2);

    const cardholder = {
      type: "company",
      name: "Evented Robotics",
      billing: { line1: "1 Main Street", city: "Springfield", state: "IL", postal_code: "62701", country: "US" },
      tax_id: "12-3456789",
    };
    expect((await s.admin("POST", `/accounts/${acct.id}/cardholder`, cardholder)).status).toBe(200);
    const [set] = await ofType("account.cardholder_updated");
    expect(set).toMatchObject({ actor: { type: "system", id: null }, data: { object: { cardholder: { set: true, name: "Evented Robotics", type: "company" } } } });
    expect(JSON.stringify(set)).not.toContain("3456789");
    expect(await ofType("account.cardholder_updated", live)).toHaveLength(1);
    // What the owner's Setup page reads, in that mode.
    const o = await ownerSession(s, acct.id, "setup@events.example");
    expect(set.data.object).toEqual((await o.query("setup.status")).body.result.data);
  });

  it("every change an owner makes in the dashboard is an event with the owner as actor; the same calls by an API key name the key", async () => {
    const a = await account();
    const o = await ownerSession(s, a.acct.id, "actor@events.example");
    const keyId = (await s.request("GET", "/v1/api_keys/current", { key: a.key })).body.id;
    const ok = async (reply: Promise<{ status: number; body: any }>) => {
      const r = await reply;
      expect(r.status, JSON.stringify(r.body)).toBeLessThan(300);
      return r.body.result?.data ?? r.body;
    };
    const ask = (amount: number) => a.post("/v1/cards", { amount_cents: amount, policy_override: { approval_required: true } });
    const since = (await a.allEvents()).length;

    // The owner, through /trpc on the session.
    const [one, two] = [await ask(100), await ask(200)];
    const ownerMade = (await a.allEvents()).length;
    const card = await ok(o.mutation("approvals.approve", { id: one.approval_id }));
    await ok(o.mutation("approvals.reject", { id: two.approval_id, reason: "not now" }));
    await ok(o.mutation("cards.close", { id: card.id }));
    await ok(o.mutation("policies.updateDefault", { max_amount_cents: 4321 }));
    const made = await ok(o.mutation("apiKeys.create", { role: "agent", name: "owner's bot" }));
    await ok(o.mutation("apiKeys.revoke", { id: made.id }));
    // A test card on the simulated processor (on Stripe the page saves through a SetupIntent: dashboard-setup.test.ts).
    if (!s.onStripe) await ok(o.mutation("setup.saveTestCard", { payment_method: "pm_card_visa" }));
    const byOwner = (await a.allEvents()).slice(ownerMade);
    expect(byOwner.map((e) => e.type)).toEqual([
      "approval.approved",
      "card.created",
      "approval.rejected",
      "card.closed",
      "hold.released",
      "policy.updated",
      "api_key.created",
      "api_key.revoked",
      ...(s.onStripe ? [] : ["account.payment_method_updated"]),
    ]);
    for (const e of byOwner) expect(e.actor, e.type).toEqual({ type: "owner", id: o.owner.id });
    expect(JSON.stringify(byOwner)).not.toContain(made.secret);

    // The same changes with the API key name the key.
    const [three, four] = [await ask(300), await ask(400)];
    const keyMade = (await a.allEvents()).length;
    const other = await a.post(`/v1/approvals/${three.approval_id}/approve`);
    await a.post(`/v1/approvals/${four.approval_id}/reject`, { reason: "no" });
    await a.post(`/v1/cards/${other.id}/close`);
    await s.request("PUT", "/v1/policies/default", { key: a.key, body: { max_amount_cents: 5432 } });
    const byKey = (await a.allEvents()).slice(keyMade);
    expect(byKey.map((e) => e.type)).toEqual(["approval.approved", "card.created", "approval.rejected", "card.closed", "hold.released", "policy.updated"]);
    for (const e of byKey) expect(e.actor, e.type).toEqual({ type: "api_key", id: keyId });
    // The requests themselves (by the agent's key) stayed the key's.
    const asked = (await a.allEvents()).slice(since).filter((e) => e.type === "approval.created");
    expect(asked.map((e) => e.actor)).toEqual(Array(4).fill({ type: "api_key", id: keyId }));
  });

  it("lists newest first with paging and a type filter; gets one; 400 on bad input", async () => {
    const a = await account();
    for (let i = 0; i < 5; i++) await a.post("/v1/cards", { amount_cents: 100 + i });
    const first = (await s.request("GET", "/v1/events?limit=2&type=card.created", { key: a.key })).body;
    expect(first.has_more).toBe(true);
    expect(first.data.map((e: any) => e.data.object.amount_cents)).toEqual([104, 103]);
    const second = (await s.request("GET", `/v1/events?limit=2&type=card.created&starting_after=${first.data[1].id}`, { key: a.key })).body;
    expect(second.data.map((e: any) => e.data.object.amount_cents)).toEqual([102, 101]);
    const third = (await s.request("GET", `/v1/events?limit=2&type=card.created&starting_after=${second.data[1].id}`, { key: a.key })).body;
    expect(third).toMatchObject({ has_more: false, data: [{ data: { object: { amount_cents: 100 } } }] });
    // 20 by default: the five cards, and the set-up's KYB, payment method, cardholder (on Stripe) and key.
    expect((await s.request("GET", "/v1/events", { key: a.key })).body.data).toHaveLength(5 + (processor === "stripe" ? 4 : 3));

    const one = await s.request("GET", `/v1/events/${first.data[0].id}`, { key: a.key });
    expect(one.status).toBe(200);
    expect(one.body).toEqual(first.data[0]);
    expectError(await s.request("GET", "/v1/events?limit=0", { key: a.key }), 400, "validation_error");
    expectError(await s.request("GET", "/v1/events?type=card.exploded", { key: a.key }), 400, "validation_error");
    expectError(await s.request("GET", "/v1/events?starting_after=evt_nope", { key: a.key }), 400, "validation_error");
    expectError(await s.request("GET", "/v1/events/evt_000000000000000000000000", { key: a.key }), 404, "not_found");
    expectError(await s.request("GET", "/v1/events", { key: null }), 401, "unauthorized");
  });

  it("is scoped to the key's account and mode: another account's event is 404, live keys see no test events", async () => {
    const a = await account();
    const b = await account();
    await a.post("/v1/cards", { amount_cents: 100 });
    const mine = (await a.events("&type=card.created"))[0];
    expectError(await s.request("GET", `/v1/events/${mine.id}`, { key: b.key }), 404, "not_found");
    expect(await b.types("&type=card.created")).toEqual([]);
    const live = await a.acct.key("live");
    // Live mode has only the live key's own creation, and the account's set-up (one for both modes).
    expect((await s.request("GET", "/v1/events", { key: live })).body.data.map((e: any) => [e.type, e.mode])).toEqual([
      ["api_key.created", "live"],
      ...(processor === "stripe" ? [["account.cardholder_updated", "live"]] : []),
      ["account.payment_method_updated", "live"],
      ["account.kyb_updated", "live"],
    ]);
    expectError(await s.request("GET", `/v1/events/${mine.id}`, { key: live }), 404, "not_found");
    expectError(await s.request("GET", `/v1/events?starting_after=${mine.id}`, { key: b.key }), 400, "validation_error");
  });

  it("an agent key reads the events of cards, approvals, their money and the policy, not of set-up, keys or webhook endpoints", async () => {
    const a = await account();
    const agent = await a.acct.key("test", "agent");
    const endpoint = await a.post("/v1/webhook_endpoints", { url: "https://93.184.215.14/cardctl?token=s3cret", events: ["*"] });
    await s.request("PUT", "/v1/policies/default", { key: a.key, body: { max_amount_cents: 40000 } });
    const card = await a.post("/v1/cards", { amount_cents: 100 });
    const everything = (await a.allEvents()).map((e) => e.type);
    expect(everything).toEqual(expect.arrayContaining(["webhook_endpoint.created", "api_key.created", "account.kyb_updated", "policy.updated", "card.created"]));

    const seen = (await s.request("GET", "/v1/events?limit=100", { key: agent })).body.data;
    expect(seen.map((e: any) => e.type)).toEqual(["card.created", "policy.updated"]);
    expect(JSON.stringify(seen)).not.toContain("s3cret");
    const hidden = (await a.allEvents()).find((e) => e.type === "webhook_endpoint.created")!;
    expect(hidden.data.object.id).toBe(endpoint.id);
    expectError(await s.request("GET", `/v1/events/${hidden.id}`, { key: agent }), 404, "not_found");
    expect((await s.request("GET", `/v1/events/${seen[0].id}`, { key: agent })).body.data.object.id).toBe(card.id);
    const refused = expectError(await s.request("GET", "/v1/events?type=webhook_endpoint.created", { key: agent }), 403, "forbidden");
    expect(refused.message).toBe("This API key has the 'agent' role; webhook_endpoint.created events need a 'full' key.");

    const stream = await openStream(s.url, agent);
    try {
      await a.post("/v1/webhook_endpoints", { url: "https://93.184.215.14/second", events: ["*"] });
      await a.post("/v1/cards", { amount_cents: 200 });
      await stream.until(() => stream.events().length >= 1, "the card's event");
      expect(stream.events().map((e) => [e.type, e.data.object.amount_cents])).toEqual([["card.created", 200]]);
    } finally {
      await stream.close();
    }
    const typed = await fetch(`${s.url}/v1/events/stream?types=card.created,api_key.revoked`, { headers: { authorization: `Bearer ${agent}` } });
    expect(typed.status).toBe(403);
    expect((await typed.json()).error).toMatchObject({ code: "forbidden", message: "This API key has the 'agent' role; api_key.revoked events need a 'full' key." });
  });

  it("the maintenance pass purges events older than 30 days, and only those", async () => {
    const a = await account();
    for (let i = 0; i < 3; i++) await a.post("/v1/cards", { amount_cents: 100 + i });
    const events = await a.events("&type=card.created");
    const day = 24 * 3600 * 1000;
    await s.query("UPDATE events SET created_at = ? WHERE id IN (?, ?)", [Date.now() - 31 * day, events[0].id, events[1].id]);
    await s.query("UPDATE events SET created_at = ? WHERE id = ?", [Date.now() - 29 * day, events[2].id]);
    const result = await s.app.services.maintenance.run();
    expect(result.eventsPurged).toBeGreaterThanOrEqual(2);
    expect((await a.events("&type=card.created")).map((e) => e.id)).toEqual([events[2].id]);
    expectError(await s.request("GET", `/v1/events/${events[0].id}`, { key: a.key }), 404, "not_found");
  });

  describe("GET /v1/events/stream", () => {
    it("streams the account's new events live, filtered by type, with heartbeats", async () => {
      const a = await account();
      const b = await account();
      await a.post("/v1/cards", { amount_cents: 111 }); // before the stream: not sent
      const all = await openStream(s.url, a.key);
      const onlyClosed = await openStream(s.url, a.key, { query: "?types=card.closed,approval.created" });
      try {
        expect(all.res.status).toBe(200);
        expect(all.res.headers.get("content-type")).toMatch(/^text\/event-stream/);
        expect(all.res.headers.get("request-id")).toMatch(/^req_/);
        expect(Number(all.res.headers.get("ratelimit-reset"))).toBeGreaterThan(Date.now() / 1000);
        await all.until((m) => m.some((x) => x.comment === "ping"), "a heartbeat");
        await b.post("/v1/cards", { amount_cents: 999 }); // another account's: never sent
        const card = await a.post("/v1/cards", { amount_cents: 222 });
        await a.post(`/v1/cards/${card.id}/close`);
        const closed = await all.waitForEvent("card.closed");
        expect(closed.data.object.id).toBe(card.id);
        expect(all.events().map((e) => e.type)).toEqual(["card.created", "card.closed", "hold.released"].slice(0, all.events().length));
        const sent = all.messages.filter((m) => m.data);
        // Each message's id is a cursor that starts with its event's id.
        expect(sent.map((m) => m.id!.split(".")[0])).toEqual(all.events().map((e) => e.id));
        expect(all.events()[0]).toEqual((await s.request("GET", `/v1/events/${all.events()[0].id}`, { key: a.key })).body);
        await onlyClosed.waitForEvent("card.closed");
        expect(onlyClosed.events().map((e) => e.type)).toEqual(["card.closed"]);
      } finally {
        await all.close();
        await onlyClosed.close();
      }
    });

    it("resumes after Last-Event-ID", async () => {
      const a = await account();
      const first = await a.post("/v1/cards", { amount_cents: 100 });
      await a.post("/v1/cards", { amount_cents: 200 });
      await a.post("/v1/cards", { amount_cents: 300 });
      const events = await a.events("&type=card.created");
      expect(events[0].data.object.id).toBe(first.id);
      const stream = await openStream(s.url, a.key, { lastEventId: events[0].id, query: "?types=card.created" });
      try {
        await stream.until(() => stream.events().length >= 2, "two events");
        expect(stream.events().map((e) => e.data.object.amount_cents)).toEqual([200, 300]);
      } finally {
        await stream.close();
      }
    });

    it("resumes from a message's cursor without repeating an event", async () => {
      const a = await account();
      const stream = await openStream(s.url, a.key, { query: "?types=card.created" });
      let cursor: string;
      try {
        for (const amount of [100, 200]) await a.post("/v1/cards", { amount_cents: amount });
        await stream.until(() => stream.events().length >= 2, "two events");
        cursor = stream.messages.filter((m) => m.data).at(-1)!.id!;
      } finally {
        await stream.close();
      }
      await a.post("/v1/cards", { amount_cents: 300 });
      const resumed = await openStream(s.url, a.key, { lastEventId: cursor, query: "?types=card.created" });
      try {
        await resumed.until(() => resumed.events().length >= 1, "the event after the cursor");
        await a.post("/v1/cards", { amount_cents: 400 });
        await resumed.until(() => resumed.events().length >= 2, "the next event");
        expect(resumed.events().map((e) => e.data.object.amount_cents)).toEqual([300, 400]);
      } finally {
        await resumed.close();
      }
    });

    /** A stream of card.created resumed from `lastEventId` sends the event `id` (one that committed late). */
    async function resumedSees(key: string, lastEventId: string, id: string) {
      const resumed = await openStream(s.url, key, { lastEventId, query: "?types=card.created" });
      try {
        await resumed.until(() => resumed.events().some((e) => e.id === id), "the late event");
      } finally {
        await resumed.close();
      }
    }

    it("resuming finds an event that committed out of order, below the last one the client got", async () => {
      const a = await account();
      const top = await topSeq(s);
      // Seq top+5 is read first, and top+3 commits after the client went away.
      const event = (seq: number, id: string) => writeEventAt(s, a.acct.id, seq, id);
      const stream = await openStream(s.url, a.key, { query: "?types=card.created" });
      let cursor: string;
      try {
        await stream.until((m) => m.some((x) => x.comment === "connected"), "the stream");
        await event(top + 5, "evt_readfirst00000000000000");
        await stream.until(() => stream.events().length >= 1, "the first event");
        cursor = stream.messages.find((m) => m.data)!.id!;
      } finally {
        await stream.close();
      }
      await event(top + 3, "evt_committedlate0000000000");
      await resumedSees(a.key, cursor, "evt_committedlate0000000000");
    });

    it("the opening message carries the stream's position: resumed from it before any event came, none is missed", async () => {
      const a = await account();
      const opening = async () => {
        const stream = await openStream(s.url, a.key, { query: "?types=card.created" });
        try {
          await stream.until((m) => m.some((x) => x.id !== undefined), "the opening id");
          return stream.messages.find((m) => m.id !== undefined)!.id!;
        } finally {
          await stream.close();
        }
      };
      const resumedGets = async (lastEventId: string, amount: number) => {
        await a.post("/v1/cards", { amount_cents: amount }); // while the client is away
        const resumed = await openStream(s.url, a.key, { lastEventId, query: "?types=card.created" });
        try {
          await resumed.until(() => resumed.events().length >= 1, "the event made meanwhile");
          expect(resumed.events().map((e) => e.data.object.amount_cents)).toEqual([amount]);
        } finally {
          await resumed.close();
        }
      };
      const position = await opening();
      expect(position.split(".")).toHaveLength(4);
      await resumedGets(position, 700);
      // A mode of the account with no event yet: every event comes after its position.
      await s.query("DELETE FROM events WHERE account_id = ? AND mode = 'test'", [a.acct.id]);
      const empty = await opening();
      expect(empty).toBe("-.-.-.0");
      await resumedGets(empty, 800);
    });

    /** An event of 31 days ago, by its id's time as by its created_at (one the purge takes), at `seq`: its id. */
    async function monthOldEventAt(accountId: string, seq: number) {
      const monthAgo = Date.now() - 31 * 24 * 3600 * 1000;
      const id = `evt_${timeStampOf(monthAgo)}${randomToken(16)}`;
      await writeEventAt(s, accountId, seq, id);
      await s.query("UPDATE events SET created_at = ? WHERE id = ?", [monthAgo, id]);
      return id;
    }

    it("resumes after an event the purge took (a quiet month): every event kept after it is sent", async () => {
      const a = await account();
      // The last event the client got, 31 days ago; one since, and the newest of the outbox elsewhere.
      const gone = await monthOldEventAt(a.acct.id, (await topSeq(s)) + 1);
      await a.post("/v1/cards", { amount_cents: 200 });
      await (await account()).post("/v1/cards", { amount_cents: 300 });
      await s.app.services.events.purgeExpired();
      expect(await s.query("SELECT id FROM events WHERE id = ?", [gone])).toEqual([]);
      // As an event's id, and as a cursor naming it.
      for (const lastEventId of [gone, `${gone}.-.${gone}.1`]) {
        const stream = await openStream(s.url, a.key, { lastEventId, query: "?types=card.created" });
        try {
          await stream.until(() => stream.events().length >= 1, "the kept event");
          expect(stream.events().map((e) => e.data.object.amount_cents)).toEqual([200]);
        } finally {
          await stream.close();
        }
      }
    });

    it("resending finds an event that committed late below the cursor when the purge took the cursor's floor", async () => {
      const a = await account();
      const top = await topSeq(s);
      // The stream's floor is an event of 31 days ago; top+5 is read first, top+4 commits after the client went away.
      const floor = await monthOldEventAt(a.acct.id, top + 1);
      const stream = await openStream(s.url, a.key, { query: "?types=card.created" });
      let cursor: string;
      try {
        await stream.until((m) => m.some((x) => x.comment === "connected"), "the stream");
        await writeEventAt(s, a.acct.id, top + 5, "evt_readfirstF00000000000000");
        await stream.until(() => stream.events().length >= 1, "the first event");
        cursor = stream.messages.find((m) => m.data)!.id!;
      } finally {
        await stream.close();
      }
      expect(cursor.split(".")[1]).toBe(floor);
      await s.app.services.events.purgeExpired();
      await writeEventAt(s, a.acct.id, top + 4, "evt_committedlateF000000000");
      await resumedSees(a.key, cursor, "evt_committedlateF000000000");
    });

    it("refuses a Last-Event-ID that names no event of the account and mode (rather than starting from now)", async () => {
      const a = await account();
      const b = await account();
      await b.post("/v1/cards", { amount_cents: 100 });
      const [others] = await b.events("&type=card.created");
      for (const lastEventId of [others.id, `${others.id}.-.${others.id}.1`, "evt_nosuchevent", "not-an-id"]) {
        const res = await fetch(`${s.url}/v1/events/stream`, { headers: { authorization: `Bearer ${a.key}`, "last-event-id": lastEventId } });
        expect(res.status).toBe(400);
        const { error } = await res.json();
        expect(error).toMatchObject({ code: "validation_error", details: { issues: [{ path: "Last-Event-ID" }] } });
        expect(error.message).toContain("names no event of this account in test mode");
      }
    });

    it("ends once its key is revoked, sending nothing after: at the next event, or at the next heartbeat", async () => {
      const a = await account();
      const created = (await s.admin("POST", `/accounts/${a.acct.id}/keys`, { mode: "test", name: "streamer" })).body;
      const all = await openStream(s.url, created.secret);
      const quiet = await openStream(s.url, created.secret, { query: "?types=approval.created" });
      try {
        await all.until((m) => m.some((x) => x.comment === "connected"), "the stream");
        await quiet.until((m) => m.some((x) => x.comment === "connected"), "the stream");
        expect((await s.admin("POST", `/keys/${created.id}/revoke`)).status).toBe(200);
        await a.post("/v1/cards", { amount_cents: 100 });
        expect(await all.ended()).toBe(true);
        expect(await quiet.ended()).toBe(true);
        expect(all.events().map((e) => e.type)).toEqual([]);
      } finally {
        await all.close();
        await quiet.close();
      }
    });

    it("ends once the owner's session is signed out", async () => {
      const a = await account();
      const owner = await ownerSession(s, a.acct.id, `stream-${a.acct.id.toLowerCase()}@example.com`);
      const { cookie } = owner.headers();
      const stream = await openStream(s.url, null, { headers: { cookie: cookie! } });
      try {
        await stream.until((m) => m.some((x) => x.comment === "ping"), "a heartbeat");
        expect((await s.request("POST", "/auth/sign-out", { key: null, headers: owner.headers() })).status).toBe(204);
        expect(await stream.ended()).toBe(true);
      } finally {
        await stream.close();
      }
    });

    for (const start of ["now", "an event's id"])
      it(`a stream from ${start} sends an event that commits late below the last one there was, and not that last one`, async () => {
        const a = await account();
        const top = await topSeq(s);
        const [visible, late] = start === "now" ? ["evt_visiblefirstN000000000", "evt_committedlaterN0000000"] : ["evt_visiblefirstI000000000", "evt_committedlaterI0000000"];
        // Seq top+5 is committed when the stream opens; top+3 (its seq given earlier) commits after.
        await writeEventAt(s, a.acct.id, top + 5, visible);
        const stream = await openStream(s.url, a.key, { query: "?types=card.created", ...(start === "now" ? {} : { lastEventId: visible }) });
        try {
          await stream.until((m) => m.some((x) => x.comment === "connected"), "the stream");
          await writeEventAt(s, a.acct.id, top + 3, late);
          await stream.until(() => stream.events().length >= 1, "the late event");
          await a.post("/v1/cards", { amount_cents: 300 });
          await stream.until(() => stream.events().length >= 2, "the next event");
          expect(stream.events().map((e) => e.id)).toEqual([late, expect.stringMatching(/^evt_/)]);
          expect(stream.events()[1].data.object.amount_cents).toBe(300);
        } finally {
          await stream.close();
        }
      });

    it("refuses a missing key and unknown types", async () => {
      const noKey = await fetch(`${s.url}/v1/events/stream`);
      expect(noKey.status).toBe(401);
      const bad = await fetch(`${s.url}/v1/events/stream?types=card.created,nope`, { headers: { authorization: `Bearer ${s.apiKey}` } });
      expect(bad.status).toBe(400);
      expect((await bad.json()).error).toMatchObject({ code: "validation_error", details: { issues: [{ path: "types" }] } });
    });
  });
});

describe(`the events' purge and their order (${dbKind})`, () => {
  it("keeps the newest event even when every event is older than 30 days, so the next event still comes after it", async () => {
    const s = await startServer();
    try {
      for (let i = 0; i < 3; i++) await s.request("POST", "/v1/cards", { body: { amount_cents: 100 + i } });
      await s.query("UPDATE events SET created_at = ?", [Date.now() - 31 * 24 * 3600 * 1000]);
      const before: { seq: number; id: string }[] = await s.query("SELECT seq, id FROM events ORDER BY seq");
      expect(before.length).toBeGreaterThan(3);
      expect((await s.app.services.maintenance.run()).eventsPurged).toBe(before.length - 1);
      const kept: { seq: number; id: string }[] = await s.query("SELECT seq, id FROM events");
      expect(kept.map((e) => e.id)).toEqual([before.at(-1)!.id]);
      const card = await s.request("POST", "/v1/cards", { body: { amount_cents: 500 } });
      const next: { seq: number }[] = await s.query("SELECT seq FROM events WHERE type = 'card.created' AND data LIKE ?", [`%${card.body.id}%`]);
      expect(Number(next[0]!.seq)).toBeGreaterThan(Number(kept[0]!.seq));
      // The newest listed first, as always.
      expect((await s.request("GET", "/v1/events?limit=1")).body.data[0].data.object.id).toBe(card.body.id);
    } finally {
      await s.close();
    }
  });
});

describe(`event streams woken by this instance's commits (${dbKind})`, () => {
  it("send an event committed on their instance at once, though they poll only hourly; another account's commit wakes none", async () => {
    const s = await startServer({ EVENT_STREAM_POLL_MS: "3600000" });
    try {
      const other = await (await s.newAccount()).key();
      const stream = await openStream(s.url, s.apiKey, { query: "?types=card.created,policy.updated" });
      try {
        await stream.until((m) => m.some((x) => x.comment === "connected"), "the stream's start");
        // The first read runs at once; after it, only a commit here brings the next.
        await s.request("POST", "/v1/cards", { body: { amount_cents: 100 }, key: other });
        const mine = await s.request("POST", "/v1/cards", { body: { amount_cents: 200 } });
        expect((await stream.waitForEvent("card.created")).data.object.id).toBe(mine.body.id);
        await s.request("PUT", "/v1/policies/default", { body: { max_amount_cents: 40000 } });
        await stream.waitForEvent("policy.updated");
        expect(stream.events().map((e) => e.type)).toEqual(["card.created", "policy.updated"]);
      } finally {
        await stream.close();
      }
    } finally {
      await s.close();
    }
  });

  it("send a backlog larger than one read (a resume) whole, each read after a full one at once, not at the next poll", async () => {
    const s = await startServer({ EVENT_STREAM_POLL_MS: "3600000" });
    try {
      // 450 events committed elsewhere (nothing wakes this instance): three reads of up to 200.
      const top = await topSeq(s);
      const ids = Array.from({ length: 451 }, (_, i) => `evt_backlog${String(i).padStart(5, "0")}${randomToken(12)}`);
      for (const [i, id] of ids.entries()) await writeEventAt(s, s.accountId, top + 1 + i, id);
      const stream = await openStream(s.url, s.apiKey, { lastEventId: ids[0] });
      try {
        await stream.until(() => stream.events().length >= 450, "the whole backlog");
        expect(stream.events().map((e) => e.id)).toEqual(ids.slice(1));
      } finally {
        await stream.close();
      }
    } finally {
      await s.close();
    }
  });
});

describe(`event streams and the server's lifetime (${dbKind})`, () => {
  it("outlive REQUEST_TIMEOUT_MS, and end when the server closes", async () => {
    const s = await startServer({ REQUEST_TIMEOUT_MS: "1000", EVENT_STREAM_HEARTBEAT_MS: "100" });
    let closed = false;
    try {
      const stream = await openStream(s.url, s.apiKey);
      // Longer than the request timeout (Node checks it every second): still open, still delivering.
      await stream.until((m) => m.filter((x) => x.comment === "ping").length >= 25, "25 heartbeats");
      await s.request("POST", "/v1/cards", { body: { amount_cents: 100 } });
      await stream.waitForEvent("card.created");
      const ended = stream.ended();
      await s.close();
      closed = true;
      expect(await ended).toBe(true);
    } finally {
      if (!closed) await s.close();
    }
  });
});
