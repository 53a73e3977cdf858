import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dbKind, expectError, startServer, type TestServer } from "./harness.js";
import { expectKeys, guarded, trpc } from "./helpers.js";

/** POST /v1/cards/:id/close (spec 4.4; section 3 rows OPEN → CLOSED and CLOSED → CLOSED). */
describe(`closing cards (${dbKind})`, () => {
  let s: TestServer;
  beforeAll(async () => {
    s = guarded(await startServer());
  });
  afterAll(() => s.close());

  const fresh = async () => (await s.newAccount()).key();
  const mk = async (key: string, amount: number) => {
    const r = await s.request("POST", "/v1/cards", { key, body: { amount_cents: amount } });
    expect(r.status).toBe(201);
    return r.body.id as string;
  };
  const balance = async (key: string) => (await s.request("GET", "/v1/balance", { key })).body;

  it("closes an OPEN card: {ok, status}, revoked at the processor, hold cancelled, balance drops", async () => {
    const key = await fresh();
    const a = await mk(key, 1500);
    const b = await mk(key, 700);
    expect(await balance(key)).toMatchObject({ held_cents: 2200, open_cards: 2 });
    const r = await s.request("POST", `/v1/cards/${a}/close`, { key });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ ok: true, status: "CLOSED" });
    expect(await balance(key)).toMatchObject({ held_cents: 700, open_cards: 1 });
    const [card] = await s.query("SELECT status, hold_status, hold_id, processor_card_id FROM cards WHERE id = ?", [a]);
    expect(card).toMatchObject({ status: "CLOSED", hold_status: "RELEASED" });
    expect((await s.processor.hold(card.hold_id))?.status).toBe("canceled");
    expect(await s.processor.card(card.processor_card_id)).toBe("canceled");
    // The other card is untouched.
    expect((await s.request("GET", `/v1/cards/${b}`, { key })).body.status).toBe("OPEN");
  });

  it("is idempotent: closing a CLOSED card returns 200 with the same body and changes nothing", async () => {
    const key = await fresh();
    const id = await mk(key, 900);
    await s.request("POST", `/v1/cards/${id}/close`, { key });
    const first = (await s.request("GET", `/v1/cards/${id}`, { key })).body;
    for (let i = 0; i < 2; i++) {
      const again = await s.request("POST", `/v1/cards/${id}/close`, { key });
      expect(again.status).toBe(200);
      expect(again.body).toEqual({ ok: true, status: "CLOSED" });
    }
    const after = (await s.request("GET", `/v1/cards/${id}`, { key })).body;
    expect(after.closed_at).toBe(first.closed_at);
    expect(after.status).toBe("CLOSED");
    expect(await balance(key)).toMatchObject({ held_cents: 0, open_cards: 0 });
  });

  it("works without a Content-Type header and without a body, and with an empty JSON body", async () => {
    const key = await fresh();
    const id = await mk(key, 100);
    const res = await fetch(`${s.url}/v1/cards/${id}/close`, { method: "POST", headers: { authorization: `Bearer ${key}` } });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ok: true, status: "CLOSED" });
    const id2 = await mk(key, 100);
    const r = await s.request("POST", `/v1/cards/${id2}/close`, { key, rawBody: "", headers: { "content-type": "application/json" } });
    expect(r.status).toBe(200);
    const id3 = await mk(key, 100);
    expect((await s.request("POST", `/v1/cards/${id3}/close`, { key, body: {} })).status).toBe(200);
  });

  it("an empty body with any Content-Type is no body (curl -d '' sends a form type)", async () => {
    const key = await fresh();
    for (const type of ["application/x-www-form-urlencoded", "text/plain"]) {
      const id = await mk(key, 100);
      const r = await s.request("POST", `/v1/cards/${id}/close`, { key, rawBody: "", headers: { "content-type": type } });
      expect(r.status, type).toBe(200);
      expect(r.body).toEqual({ ok: true, status: "CLOSED" });
    }
    const appr = (await s.request("POST", "/v1/cards", { key, body: { amount_cents: 100, policy_override: { approval_required: true } } })).body;
    const approved = await s.request("POST", `/v1/approvals/${appr.approval_id}/approve`, {
      key,
      rawBody: "",
      headers: { "content-type": "application/x-www-form-urlencoded" },
    });
    expect(approved.status).toBe(201);
    // A non-empty body of another type is still refused.
    const id = await mk(key, 100);
    expectError(await s.request("POST", `/v1/cards/${id}/close`, { key, rawBody: "x=1", headers: { "content-type": "application/x-www-form-urlencoded" } }), 415, "unsupported_media_type");
  });

  it("parallel closes of one card all answer 200 CLOSED; the hold is cancelled once", async () => {
    const key = await fresh();
    const id = await mk(key, 3000);
    const replies = await Promise.all(Array.from({ length: 8 }, () => s.request("POST", `/v1/cards/${id}/close`, { key })));
    for (const r of replies) expect([r.status, r.body]).toEqual([200, { ok: true, status: "CLOSED" }]);
    const [card] = await s.query("SELECT status, hold_status, hold_id FROM cards WHERE id = ?", [id]);
    expect(card).toMatchObject({ status: "CLOSED", hold_status: "RELEASED" });
    expect((await s.processor.holds(id)).map((h) => h.status)).toEqual(["canceled"]);
    expect((await s.processor.hold(card.hold_id))?.status).toBe("canceled");
    expect(await balance(key)).toMatchObject({ held_cents: 0, open_cards: 0 });
  });

  it("a USED card cannot be closed: 409 card_not_open with details.status", async () => {
    const key = await fresh();
    const id = await mk(key, 800);
    expect((await s.request("POST", `/v1/test_helpers/cards/${id}/purchase`, { key, body: { amount_cents: 200 } })).body.approved).toBe(true);
    const err = expectError(await s.request("POST", `/v1/cards/${id}/close`, { key }), 409, "card_not_open");
    expect(err.details).toEqual({ status: "USED" });
    expect((await s.request("GET", `/v1/cards/${id}`, { key })).body.status).toBe("USED");
  });

  it("404 not_found for an unknown id and another account's card (which stays OPEN)", async () => {
    const key = await fresh();
    const other = await fresh();
    const id = await mk(key, 100);
    expectError(await s.request("POST", "/v1/cards/card_doesnotexist/close", { key }), 404, "not_found");
    expectError(await s.request("POST", `/v1/cards/${id}/close`, { key: other }), 404, "not_found");
    expect((await s.request("GET", `/v1/cards/${id}`, { key })).body.status).toBe("OPEN");
    expect(await balance(key)).toMatchObject({ held_cents: 100, open_cards: 1 });
  });

  it("an approval id is not a card id: 404", async () => {
    const key = await fresh();
    const appr = (await s.request("POST", "/v1/cards", { key, body: { amount_cents: 100, policy_override: { approval_required: true } } })).body;
    expectError(await s.request("POST", `/v1/cards/${appr.approval_id}/close`, { key }), 404, "not_found");
    expectError(await s.request("GET", `/v1/cards/${appr.approval_id}`, { key }), 404, "not_found");
  });

  it("is the same on the tRPC transport", async () => {
    const key = await fresh();
    const id = await mk(key, 250);
    const r = await trpc(s).mutation("cards.close", { id }, { key });
    expect(r.status).toBe(200);
    expectKeys(r.body, ["result"]);
    expect(r.body.result.data).toEqual({ ok: true, status: "CLOSED" });
    expect((await trpc(s).mutation("cards.close", { id }, { key })).body.result.data).toEqual({ ok: true, status: "CLOSED" });
    expectError(await trpc(s).mutation("cards.close", { id: "card_nope" }, { key }), 404, "not_found");
    expect(await balance(key)).toMatchObject({ held_cents: 0 });
  });
});
