import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dbKind, expectError, startServer, type TestServer } from "./harness.js";
import { expectCreatedCard, expectKeys, guarded, ISO, trpc } from "./helpers.js";

/** POST /v1/cards (spec 4.1, section 3 rows 1-2, DESIGN 3.4 order of checks and overrides). */
describe(`POST /v1/cards (${dbKind})`, () => {
  let s: TestServer;
  beforeAll(async () => {
    s = guarded(await startServer());
  });
  afterAll(() => s.close());

  const fresh = async (o: { kyb?: boolean; paymentMethod?: string | null } = {}) => {
    const account = await s.newAccount(o);
    return { account, key: await account.key() };
  };
  const create = (key: string, body: unknown) => s.request("POST", "/v1/cards", { key, body });
  const heldCents = async (key: string) => (await s.request("GET", "/v1/balance", { key })).body.held_cents as number;

  it("201: mints a card within policy, with exactly the create fields, and places a hold", async () => {
    const { key } = await fresh();
    const r = await create(key, { amount_cents: 2599, agent_id: "agent-7", purpose: "Domain renewal" });
    expect(r.status).toBe(201);
    expectCreatedCard(r.body, { amount: 2599, agent_id: "agent-7" });
    expect(Date.parse(r.body.created_at)).toBeGreaterThan(Date.now() - 60_000);
    expect(await heldCents(key)).toBe(2599);
    const [row] = await s.query("SELECT status, hold_status, purpose FROM cards WHERE id = ?", [r.body.id]);
    expect(row).toEqual({ status: "OPEN", hold_status: "OPEN", purpose: "Domain renewal" });
  });

  it("201 without agent_id: agent_id is null; the boundaries 1 and 50000 are accepted", async () => {
    const { key } = await fresh();
    const one = await create(key, { amount_cents: 1 });
    expect(one.status).toBe(201);
    expectCreatedCard(one.body, { amount: 1, agent_id: null });
    const max = await create(key, { amount_cents: 50000, purpose: "p".repeat(500), agent_id: "a".repeat(255) });
    expect(max.status).toBe(201);
    expectCreatedCard(max.body, { amount: 50000, agent_id: "a".repeat(255) });
    expect(one.body.id).not.toBe(max.body.id);
    expect(await heldCents(key)).toBe(50001);
  });

  it("202: approval_required in the default policy records a request and makes no card", async () => {
    const { key } = await fresh();
    expect((await s.request("PUT", "/v1/policies/default", { key, body: { approval_required: true } })).status).toBe(200);
    const before = Date.now();
    const r = await create(key, { amount_cents: 1200, agent_id: "agent-1", purpose: "books" });
    expect(r.status).toBe(202);
    expectKeys(r.body, ["status", "approval_id", "expires_at"]);
    expect(r.body.status).toBe("PENDING_APPROVAL");
    expect(r.body.approval_id).toMatch(/^appr_[A-Za-z0-9]+$/);
    expect(r.body.expires_at).toMatch(ISO);
    // Default TTL is 24 h.
    const ttl = Date.parse(r.body.expires_at) - before;
    expect(ttl).toBeGreaterThan(86400_000 - 60_000);
    expect(ttl).toBeLessThanOrEqual(86400_000 + 60_000);
    expect((await s.request("GET", "/v1/cards", { key })).body.data).toEqual([]);
    const b = (await s.request("GET", "/v1/balance", { key })).body;
    expect(b).toMatchObject({ held_cents: 0, open_cards: 0, pending_approvals: 1 });
    const approvals = (await s.request("GET", "/v1/approvals", { key })).body.data;
    expect(approvals.map((a: any) => [a.id, a.amount_cents, a.agent_id, a.purpose, a.status])).toEqual([
      [r.body.approval_id, 1200, "agent-1", "books", "PENDING"],
    ]);
  });

  describe("403 setup_required", () => {
    const cases: [string, { kyb?: boolean; paymentMethod?: string | null }, string[]][] = [
      ["kyb and payment method missing", { kyb: false, paymentMethod: null }, ["kyb", "payment_method"]],
      ["kyb missing", { kyb: false }, ["kyb"]],
      ["payment method missing", { paymentMethod: null }, ["payment_method"]],
    ];
    for (const [name, setup, missing] of cases)
      it(`${name}: details.missing = ${JSON.stringify(missing)} and a setup_url`, async () => {
        const { account, key } = await fresh(setup);
        const err = expectError(await create(key, { amount_cents: 500 }), 403, "setup_required");
        expectKeys(err.details, ["missing", "setup_url"]);
        expect(err.details.missing).toEqual(missing);
        expect(err.details.setup_url).toBe("http://cardctl.test/setup");
        expect(() => new URL(err.details.setup_url)).not.toThrow();
        expect(await heldCents(key)).toBe(0);
        expect(await s.query("SELECT id FROM cards WHERE account_id = ?", [account.id])).toEqual([]);
      });

    it("the setup_url page answers with HTML", async () => {
      const { key } = await fresh({ kyb: false });
      const url = new URL(expectError(await create(key, { amount_cents: 500 }), 403, "setup_required").details.setup_url);
      const page = await fetch(s.url + url.pathname);
      expect(page.status).toBe(200);
      expect(page.headers.get("content-type")).toMatch(/text\/html/);
    });

    it("setup is also required when approval would be needed (no approval is recorded)", async () => {
      const { key } = await fresh({ paymentMethod: null });
      expectError(await create(key, { amount_cents: 500, policy_override: { approval_required: true } }), 403, "setup_required");
      expect((await s.request("GET", "/v1/approvals", { key })).body.data).toEqual([]);
    });
  });

  describe("403 policy_violation", () => {
    it("amount above the default maximum: details and message", async () => {
      const { key } = await fresh();
      await s.request("PUT", "/v1/policies/default", { key, body: { max_amount_cents: 1000 } });
      const err = expectError(await create(key, { amount_cents: 1001 }), 403, "policy_violation");
      expect(err.details).toEqual({ max_amount_cents: 1000, requested: 1001 });
      expect(err.message).toMatch(/exceeds the policy maximum/);
      expect(await heldCents(key)).toBe(0);
      // Exactly at the maximum is allowed.
      expect((await create(key, { amount_cents: 1000 })).status).toBe(201);
    });

    it("takes precedence over approval: no approval request is recorded", async () => {
      const { key } = await fresh();
      await s.request("PUT", "/v1/policies/default", { key, body: { max_amount_cents: 1000, approval_required: true } });
      expectError(await create(key, { amount_cents: 5000 }), 403, "policy_violation");
      expect((await s.request("GET", "/v1/approvals", { key })).body.data).toEqual([]);
      expect((await create(key, { amount_cents: 1000 })).status).toBe(202);
    });
  });

  describe("tighten-only overrides (DESIGN 3.4)", () => {
    it("override max_amount_cents lowers the maximum", async () => {
      const { key } = await fresh();
      const err = expectError(await create(key, { amount_cents: 600, policy_override: { max_amount_cents: 500 } }), 403, "policy_violation");
      expect(err.details).toEqual({ max_amount_cents: 500, requested: 600 });
      expect((await create(key, { amount_cents: 500, policy_override: { max_amount_cents: 500 } })).status).toBe(201);
    });

    it("override max_amount_cents cannot raise the default maximum", async () => {
      const { key } = await fresh();
      await s.request("PUT", "/v1/policies/default", { key, body: { max_amount_cents: 1000 } });
      const err = expectError(await create(key, { amount_cents: 2000, policy_override: { max_amount_cents: 5000 } }), 403, "policy_violation");
      expect(err.details).toEqual({ max_amount_cents: 1000, requested: 2000 });
    });

    it("override approval_required true asks for approval", async () => {
      const { key } = await fresh();
      const r = await create(key, { amount_cents: 700, policy_override: { approval_required: true } });
      expect(r.status).toBe(202);
      expect(r.body.status).toBe("PENDING_APPROVAL");
    });

    it("override approval_required false cannot waive the default", async () => {
      const { key } = await fresh();
      await s.request("PUT", "/v1/policies/default", { key, body: { approval_required: true } });
      const r = await create(key, { amount_cents: 700, policy_override: { approval_required: false, max_amount_cents: 50000 } });
      expect(r.status).toBe(202);
      expect(await heldCents(key)).toBe(0);
    });

    it("an empty override changes nothing", async () => {
      const { key } = await fresh();
      const r = await create(key, { amount_cents: 700, policy_override: {} });
      expect(r.status).toBe(201);
      expectCreatedCard(r.body, { amount: 700 });
    });
  });

  describe("400 validation_error with details.issues", () => {
    const bad: [string, unknown, string][] = [
      ["amount_cents missing", {}, "amount_cents"],
      ["amount_cents 0", { amount_cents: 0 }, "amount_cents"],
      ["amount_cents negative", { amount_cents: -5 }, "amount_cents"],
      ["amount_cents 50001", { amount_cents: 50001 }, "amount_cents"],
      ["amount_cents fractional", { amount_cents: 10.5 }, "amount_cents"],
      ["amount_cents as a string", { amount_cents: "100" }, "amount_cents"],
      ["amount_cents null", { amount_cents: null }, "amount_cents"],
      ["purpose of 501 characters", { amount_cents: 100, purpose: "x".repeat(501) }, "purpose"],
      ["purpose not a string", { amount_cents: 100, purpose: 5 }, "purpose"],
      ["agent_id empty", { amount_cents: 100, agent_id: "" }, "agent_id"],
      ["agent_id of 256 characters", { amount_cents: 100, agent_id: "a".repeat(256) }, "agent_id"],
      ["policy_override.max_amount_cents -1", { amount_cents: 100, policy_override: { max_amount_cents: -1 } }, "policy_override.max_amount_cents"],
      ["policy_override.max_amount_cents 1.5", { amount_cents: 100, policy_override: { max_amount_cents: 1.5 } }, "policy_override.max_amount_cents"],
      ["policy_override.approval_required as a string", { amount_cents: 100, policy_override: { approval_required: "false" } }, "policy_override.approval_required"],
      ["policy_override not an object", { amount_cents: 100, policy_override: true }, "policy_override"],
    ];
    for (const [name, body, path] of bad)
      it(name, async () => {
        const err = expectError(await s.request("POST", "/v1/cards", { body }), 400, "validation_error");
        expectKeys(err.details, ["issues"]);
        expect(Array.isArray(err.details.issues)).toBe(true);
        expect(err.details.issues.length).toBeGreaterThanOrEqual(1);
        for (const issue of err.details.issues) {
          expectKeys(issue, ["path", "message"]);
          expect(typeof issue.message).toBe("string");
        }
        expect(err.details.issues.map((i: any) => i.path)).toContain(path);
      });

    it("a JSON array or a bare number as body", async () => {
      for (const rawBody of ["[]", "42", '"x"', "null"])
        expectError(
          await s.request("POST", "/v1/cards", { rawBody, headers: { "content-type": "application/json" } }),
          400,
          "validation_error",
        );
    });

    it("an empty body names amount_cents", async () => {
      const err = expectError(await s.request("POST", "/v1/cards", { headers: { "content-type": "application/json" } }), 400, "validation_error");
      expect(JSON.stringify(err.details.issues)).toContain("amount_cents");
    });
  });

  describe("order of checks: validation → setup → policy → approval → mint", () => {
    it("validation comes before setup_required", async () => {
      const { key } = await fresh({ kyb: false, paymentMethod: null });
      expectError(await create(key, { amount_cents: 0 }), 400, "validation_error");
      expectError(await create(key, { amount_cents: 50001 }), 400, "validation_error");
    });

    it("setup_required comes before policy_violation", async () => {
      const { key } = await fresh({ kyb: false });
      expectError(await create(key, { amount_cents: 900, policy_override: { max_amount_cents: 100 } }), 403, "setup_required");
    });

    it("policy_violation comes before approval, approval before minting", async () => {
      const { key } = await fresh();
      expectError(
        await create(key, { amount_cents: 900, policy_override: { max_amount_cents: 100, approval_required: true } }),
        403,
        "policy_violation",
      );
      const pending = await create(key, { amount_cents: 100, policy_override: { max_amount_cents: 100, approval_required: true } });
      expect(pending.status).toBe(202);
      expect(await heldCents(key)).toBe(0);
      const card = await create(key, { amount_cents: 100, policy_override: { max_amount_cents: 100 } });
      expect(card.status).toBe(201);
      expect(await heldCents(key)).toBe(100);
    });
  });

  it("Idempotency-Keys that differ only in case are different keys (SQLite and MariaDB alike)", async () => {
    const { key } = await fresh();
    const ids = [];
    // (Header values lose surrounding whitespace in HTTP itself, so no trailing-space case here.)
    for (const k of ["order-Abc", "order-abc", "ORDER-ABC", "Order-abc"]) {
      const r = await s.request("POST", "/v1/cards", { key, body: { amount_cents: 100 }, headers: { "idempotency-key": k } });
      expect(r.status, k).toBe(201);
      expect(r.headers.get("idempotent-replayed"), k).toBeNull();
      ids.push(r.body.id);
    }
    expect(new Set(ids).size).toBe(4);
    expect(await heldCents(key)).toBe(400);
  });

  describe("same behaviour on the tRPC transport", () => {
    it("201 and 202 statuses with the same data", async () => {
      const { key } = await fresh();
      const t = trpc(s);
      const made = await t.mutation("cards.create", { amount_cents: 321, agent_id: "trpc-agent" }, { key });
      expect(made.status).toBe(201);
      expectKeys(made.body, ["result"]);
      expectCreatedCard(made.body.result.data, { amount: 321, agent_id: "trpc-agent" });
      const pending = await t.mutation("cards.create", { amount_cents: 321, policy_override: { approval_required: true } }, { key });
      expect(pending.status).toBe(202);
      expectKeys(pending.body.result.data, ["status", "approval_id", "expires_at"]);
      expect(pending.body.result.data.status).toBe("PENDING_APPROVAL");
    });

    it("the same error envelopes: 400, 403 setup_required, 403 policy_violation, 401", async () => {
      const t = trpc(s);
      const v = expectError(await t.mutation("cards.create", { amount_cents: 0 }), 400, "validation_error");
      expect(v.details.issues[0]).toEqual({ path: "amount_cents", message: expect.any(String) });
      const { key: noSetup } = await fresh({ kyb: false });
      const su = expectError(await t.mutation("cards.create", { amount_cents: 100 }, { key: noSetup }), 403, "setup_required");
      expect(su.details).toEqual({ missing: ["kyb"], setup_url: "http://cardctl.test/setup" });
      const { key } = await fresh();
      const pv = expectError(
        await t.mutation("cards.create", { amount_cents: 300, policy_override: { max_amount_cents: 200 } }, { key }),
        403,
        "policy_violation",
      );
      expect(pv.details).toEqual({ max_amount_cents: 200, requested: 300 });
      expectError(await t.mutation("cards.create", { amount_cents: 100 }, { key: null }), 401, "unauthorized");
    });
  });
});
