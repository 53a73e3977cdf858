import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dbKind, expectError, startServer, type TestServer } from "./harness.js";
import { expectKeys, expectListCard, guarded, trpc } from "./helpers.js";

/** DESIGN 3.4 USED: POST /v1/test_helpers/cards/:id/purchase (test keys only). */
describe(`test helper purchase (${dbKind})`, () => {
  let s: TestServer;
  beforeAll(async () => {
    s = guarded(await startServer());
  });
  afterAll(() => s.close());

  const fresh = async () => (await s.newAccount()).key();
  const mk = async (key: string, amount: number) => (await s.request("POST", "/v1/cards", { key, body: { amount_cents: amount, agent_id: "buyer" } })).body;
  const buy = (key: string, id: string, body: unknown) => s.request("POST", `/v1/test_helpers/cards/${id}/purchase`, { key, body });
  const simState = async (cardId: string) => {
    const [card] = await s.query("SELECT hold_id, processor_card_id, hold_status FROM cards WHERE id = ?", [cardId]);
    const hold = await s.processor.hold(card.hold_id);
    const issued = await s.processor.card(card.processor_card_id);
    return { holdStatus: card.hold_status, hold, issued };
  };

  it("the first purchase is approved: card USED, remaining 0, hold captured for the amount, card deactivated", async () => {
    const key = await fresh();
    const card = await mk(key, 5000);
    const other = await mk(key, 1000);
    expect((await s.request("GET", "/v1/balance", { key })).body).toMatchObject({ held_cents: 6000, open_cards: 2 });
    const r = await buy(key, card.id, { amount_cents: 1234, merchant: "Bookshop" });
    expect(r.status).toBe(200);
    expectKeys(r.body, ["approved", "decline_reason", "amount_cents", "card"]);
    expect(r.body).toMatchObject({ approved: true, decline_reason: null, amount_cents: 1234 });
    expectListCard(r.body.card);
    expect(r.body.card).toMatchObject({ id: card.id, status: "USED", remaining_cents: 0, amount_cents: 5000, agent_id: "buyer", last_four: card.last_four });
    expect(await simState(card.id)).toEqual({
      holdStatus: "CAPTURED",
      hold: { status: "captured", amount_cents: 5000, captured_cents: 1234 },
      issued: "canceled",
    });
    expect((await s.request("GET", "/v1/balance", { key })).body).toMatchObject({ held_cents: 1000, open_cards: 1 });
    const got = (await s.request("GET", `/v1/cards/${card.id}`, { key })).body;
    expect(got).toMatchObject({ status: "USED", remaining_cents: 0, closed_at: null });
    expect((await s.request("GET", "/v1/cards?status=USED", { key })).body.data.map((c: any) => c.id)).toEqual([card.id]);
    expect((await s.request("GET", `/v1/cards/${other.id}`, { key })).body.status).toBe("OPEN");
  });

  it("a second purchase on a used card is declined (card_not_open), nothing changes", async () => {
    const key = await fresh();
    const card = await mk(key, 900);
    expect((await buy(key, card.id, { amount_cents: 100 })).body.approved).toBe(true);
    const r = await buy(key, card.id, { amount_cents: 100 });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ approved: false, decline_reason: "card_not_open", amount_cents: 100 });
    expect(r.body.card).toMatchObject({ status: "USED", remaining_cents: 0 });
    expect((await simState(card.id)).hold?.captured_cents).toBe(100);
  });

  it("an amount over remaining_cents is declined (amount_exceeds_remaining); the card stays OPEN with its hold", async () => {
    const key = await fresh();
    const card = await mk(key, 900);
    const r = await buy(key, card.id, { amount_cents: 901 });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ approved: false, decline_reason: "amount_exceeds_remaining", amount_cents: 901 });
    expect(r.body.card).toMatchObject({ id: card.id, status: "OPEN", remaining_cents: 900 });
    expect(await simState(card.id)).toMatchObject({ holdStatus: "OPEN", hold: { status: "requires_capture" }, issued: "active" });
    expect((await s.request("GET", "/v1/balance", { key })).body).toMatchObject({ held_cents: 900, open_cards: 1 });
    // Exactly the remaining amount is approved.
    const exact = await buy(key, card.id, { amount_cents: 900 });
    expect(exact.body).toMatchObject({ approved: true, card: { status: "USED", remaining_cents: 0 } });
    expect((await simState(card.id)).hold).toEqual({ status: "captured", amount_cents: 900, captured_cents: 900 });
  });

  it("a closed card declines purchases", async () => {
    const key = await fresh();
    const card = await mk(key, 500);
    await s.request("POST", `/v1/cards/${card.id}/close`, { key });
    const r = await buy(key, card.id, { amount_cents: 10 });
    expect(r.body).toMatchObject({ approved: false, decline_reason: "card_not_open", card: { status: "CLOSED" } });
    expect((await simState(card.id)).hold?.status).toBe("canceled");
  });

  it("live keys are refused with 403 forbidden", async () => {
    const account = await s.newAccount();
    const live = await account.key("live");
    const err = expectError(await buy(live, "card_anything", { amount_cents: 10 }), 403, "forbidden");
    expect(err.message).toMatch(/test/);
    expectError(await trpc(s).mutation("testHelpers.purchase", { id: "card_x", amount_cents: 10 }, { key: live }), 403, "forbidden");
  });

  it("404 for unknown and other accounts' cards; 400 for bad amounts", async () => {
    const key = await fresh();
    const other = await fresh();
    const card = await mk(key, 500);
    expectError(await buy(key, "card_doesnotexist", { amount_cents: 10 }), 404, "not_found");
    expectError(await buy(other, card.id, { amount_cents: 10 }), 404, "not_found");
    for (const body of [{}, { amount_cents: 0 }, { amount_cents: 50001 }, { amount_cents: 1.5 }, { amount_cents: 10, merchant: "m".repeat(201) }])
      expectError(await buy(key, card.id, body), 400, "validation_error");
    expect((await s.request("GET", `/v1/cards/${card.id}`, { key })).body).toMatchObject({ status: "OPEN", remaining_cents: 500 });
  });

  it("is the same on the tRPC transport", async () => {
    const key = await fresh();
    const card = await mk(key, 700);
    const r = await trpc(s).mutation("testHelpers.purchase", { id: card.id, amount_cents: 700 }, { key });
    expect(r.status).toBe(200);
    expect(r.body.result.data).toMatchObject({ approved: true, decline_reason: null, amount_cents: 700, card: { status: "USED", remaining_cents: 0 } });
  });
});
