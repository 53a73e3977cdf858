import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dbKind, expectError, startServer, type TestServer } from "./harness.js";
import { BALANCE_KEYS, expectKeys, guarded, trpc } from "./helpers.js";

/** GET/PUT /v1/policies/default (spec 4.6, 4.7) and GET /v1/balance (spec 4.5, DESIGN 3.4). */
describe(`default policy (${dbKind})`, () => {
  let s: TestServer;
  beforeAll(async () => {
    s = guarded(await startServer());
  });
  afterAll(() => s.close());

  const fresh = async () => (await s.newAccount()).key();
  const get = (key: string) => s.request("GET", "/v1/policies/default", { key });
  const put = (key: string, body: unknown) => s.request("PUT", "/v1/policies/default", { key, body });

  it("a new account's default policy: approval_required false, max_amount_cents 50000", async () => {
    const key = await fresh();
    const r = await get(key);
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ approval_required: false, max_amount_cents: 50000 });
  });

  it("PUT with both fields returns and stores the resulting policy", async () => {
    const key = await fresh();
    const r = await put(key, { approval_required: true, max_amount_cents: 1234 });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ approval_required: true, max_amount_cents: 1234 });
    expect((await get(key)).body).toEqual({ approval_required: true, max_amount_cents: 1234 });
  });

  it("PUT with one field keeps the other; an empty body changes nothing and returns both fields", async () => {
    const key = await fresh();
    expect((await put(key, { max_amount_cents: 700 })).body).toEqual({ approval_required: false, max_amount_cents: 700 });
    expect((await put(key, { approval_required: true })).body).toEqual({ approval_required: true, max_amount_cents: 700 });
    expect((await put(key, {})).body).toEqual({ approval_required: true, max_amount_cents: 700 });
    expect((await put(key, { approval_required: false })).body).toEqual({ approval_required: false, max_amount_cents: 700 });
    expect((await get(key)).body).toEqual({ approval_required: false, max_amount_cents: 700 });
  });

  it("boundaries 1 and 50000 are accepted", async () => {
    const key = await fresh();
    expect((await put(key, { max_amount_cents: 1 })).body.max_amount_cents).toBe(1);
    expect((await put(key, { max_amount_cents: 50000 })).body.max_amount_cents).toBe(50000);
  });

  const bad: [string, unknown, string][] = [
    ["max_amount_cents 0", { max_amount_cents: 0 }, "max_amount_cents"],
    ["max_amount_cents 50001", { max_amount_cents: 50001 }, "max_amount_cents"],
    ["max_amount_cents fractional", { max_amount_cents: 99.5 }, "max_amount_cents"],
    ["max_amount_cents as a string", { max_amount_cents: "100" }, "max_amount_cents"],
    ["approval_required as a string", { approval_required: "true" }, "approval_required"],
    ["approval_required as a number", { approval_required: 1 }, "approval_required"],
  ];
  for (const [name, body, path] of bad)
    it(`PUT 400 validation_error: ${name}, and the policy is unchanged`, async () => {
      const key = await fresh();
      const err = expectError(await put(key, body), 400, "validation_error");
      expect(err.details.issues.map((i: any) => i.path)).toEqual([path]);
      expect((await get(key)).body).toEqual({ approval_required: false, max_amount_cents: 50000 });
    });

  it("policies are per account and per mode", async () => {
    const account = await s.newAccount();
    const test = await account.key("test");
    const live = await account.key("live");
    const other = await fresh();
    await put(test, { approval_required: true, max_amount_cents: 42 });
    expect((await get(live)).body).toEqual({ approval_required: false, max_amount_cents: 50000 });
    expect((await get(other)).body).toEqual({ approval_required: false, max_amount_cents: 50000 });
    await put(live, { max_amount_cents: 99 });
    expect((await get(test)).body).toEqual({ approval_required: true, max_amount_cents: 42 });
  });

  it("is the same on the tRPC transport", async () => {
    const key = await fresh();
    const t = trpc(s);
    const upd = await t.mutation("policies.updateDefault", { max_amount_cents: 321 }, { key });
    expect(upd.status).toBe(200);
    expect(upd.body).toEqual({ result: { data: { approval_required: false, max_amount_cents: 321 } } });
    expect((await t.query("policies.retrieveDefault", undefined, { key })).body.result.data).toEqual({ approval_required: false, max_amount_cents: 321 });
    const err = expectError(await t.mutation("policies.updateDefault", { max_amount_cents: 0 }, { key }), 400, "validation_error");
    expect(err.details.issues[0].path).toBe("max_amount_cents");
  });
});

describe(`balance (${dbKind})`, () => {
  let s: TestServer;
  beforeAll(async () => {
    s = guarded(await startServer());
  });
  afterAll(() => s.close());

  const balance = async (key: string) => {
    const r = await s.request("GET", "/v1/balance", { key });
    expect(r.status).toBe(200);
    expectKeys(r.body, BALANCE_KEYS);
    return r.body;
  };

  it("a fresh account with setup: zeros, the default policy, setup_complete true", async () => {
    const key = await (await s.newAccount()).key();
    expect(await balance(key)).toEqual({
      held_cents: 0,
      open_cards: 0,
      pending_approvals: 0,
      max_per_card_cents: 50000,
      approval_required: false,
      setup_complete: true,
      uncollected_cents: 0,
    });
  });

  it("setup_complete false while kyb or the payment method is missing", async () => {
    const account = await s.newAccount({ kyb: false });
    const key = await account.key();
    expect((await balance(key)).setup_complete).toBe(false);
    await s.admin("POST", `/accounts/${account.id}/kyb`, { verified: true });
    expect((await balance(key)).setup_complete).toBe(true);
    await s.admin("POST", `/accounts/${account.id}/payment_method`, { payment_method: null });
    expect((await balance(key)).setup_complete).toBe(false);
  });

  it("aggregates open holds, OPEN cards and pending approvals; mirrors the default policy", async () => {
    const key = await (await s.newAccount()).key();
    const mk = async (amount: number) => (await s.request("POST", "/v1/cards", { key, body: { amount_cents: amount } })).body.id as string;
    const a = await mk(1000);
    const b = await mk(2000);
    const c = await mk(4000);
    await mk(8000);
    const ask = async () =>
      (await s.request("POST", "/v1/cards", { key, body: { amount_cents: 300, policy_override: { approval_required: true } } })).body.approval_id;
    const p1 = await ask();
    const p2 = await ask();
    await ask();
    expect(await balance(key)).toMatchObject({ held_cents: 15000, open_cards: 4, pending_approvals: 3 });
    await s.request("POST", `/v1/cards/${a}/close`, { key });
    expect(await balance(key)).toMatchObject({ held_cents: 14000, open_cards: 3 });
    // A purchase captures b's hold: it is no longer held, and b is USED.
    await s.request("POST", `/v1/test_helpers/cards/${b}/purchase`, { key, body: { amount_cents: 150 } });
    expect(await balance(key)).toMatchObject({ held_cents: 12000, open_cards: 2 });
    await s.request("POST", `/v1/approvals/${p1}/reject`, { key });
    const approved = await s.request("POST", `/v1/approvals/${p2}/approve`, { key });
    expect(approved.status).toBe(201);
    expect(await balance(key)).toMatchObject({ held_cents: 12300, open_cards: 3, pending_approvals: 1 });
    await s.request("PUT", "/v1/policies/default", { key, body: { approval_required: true, max_amount_cents: 9999 } });
    expect(await balance(key)).toEqual({
      held_cents: 12300,
      open_cards: 3,
      pending_approvals: 1,
      max_per_card_cents: 9999,
      approval_required: true,
      setup_complete: true,
      uncollected_cents: 0,
    });
    expect(c).toMatch(/^card_/);
  });

  it("reads the policy of the key's mode; an account without a policy row (a database edited by hand) has the default one", async () => {
    const account = await s.newAccount();
    const test = await account.key("test");
    const live = await account.key("live");
    await s.request("PUT", "/v1/policies/default", { key: test, body: { approval_required: true, max_amount_cents: 700 } });
    expect(await balance(test)).toMatchObject({ max_per_card_cents: 700, approval_required: true, setup_complete: true });
    expect(await balance(live)).toMatchObject({ max_per_card_cents: 50000, approval_required: false });
    expect((await s.request("POST", "/v1/cards", { key: test, body: { amount_cents: 500 } })).status).toBe(202);
    await s.query("DELETE FROM policies WHERE account_id = ? AND mode = 'test'", [account.id]);
    expect(await balance(test)).toMatchObject({ max_per_card_cents: 50000, approval_required: false, setup_complete: true });
    expect((await s.request("POST", "/v1/cards", { key: test, body: { amount_cents: 500 } })).status).toBe(201);
  });

  it("counts only the caller's account and mode", async () => {
    const account = await s.newAccount();
    const test = await account.key("test");
    const live = await account.key("live");
    await s.request("POST", "/v1/cards", { key: test, body: { amount_cents: 500 } });
    const other = await (await s.newAccount()).key();
    expect(await balance(live)).toMatchObject({ held_cents: 0, open_cards: 0, pending_approvals: 0 });
    expect(await balance(other)).toMatchObject({ held_cents: 0, open_cards: 0 });
    expect(await balance(test)).toMatchObject({ held_cents: 500, open_cards: 1 });
  });

  it("is the same on the tRPC transport", async () => {
    const key = await (await s.newAccount()).key();
    await s.request("POST", "/v1/cards", { key, body: { amount_cents: 77 } });
    const r = await trpc(s).query("balance.retrieve", undefined, { key });
    expect(r.status).toBe(200);
    expect(r.body.result.data).toEqual(await balance(key));
    expect(r.body.result.data.held_cents).toBe(77);
  });
});
