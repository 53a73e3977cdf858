import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dbKind, expectError, startServer, type TestServer } from "./harness.js";
import { expectKeys, guarded, trpc } from "./helpers.js";

/**
 * POST /v1/policies/check (DESIGN 3.8): the dry run of POST /v1/cards. It must decide exactly as
 * creation does (the same domain function), and act on nothing.
 */
describe(`POST /v1/policies/check (${dbKind})`, () => {
  let s: TestServer;
  beforeAll(async () => {
    s = guarded(await startServer());
  });
  afterAll(() => s.close());

  type Setup = { kyb?: boolean; paymentMethod?: string | null };
  const fresh = async (o: { setup?: Setup; policy?: object; role?: "full" | "agent" } = {}) => {
    const account = await s.newAccount(o.setup ?? {});
    const full = await account.key("test", "full");
    if (o.policy) expect((await s.request("PUT", "/v1/policies/default", { key: full, body: o.policy })).status).toBe(200);
    return { account, key: o.role === "agent" ? await account.key("test", "agent") : full };
  };
  const check = (key: string, body: unknown, headers: Record<string, string> = {}) =>
    s.request("POST", "/v1/policies/check", { key, body, headers });
  const create = (key: string, body: unknown) => s.request("POST", "/v1/cards", { key, body });

  /** Rows of every table a card request can write, and the processor's holds. */
  const footprint = async (accountId: string) => {
    const n = async (sql: string, args: unknown[] = [accountId]) => Number((await s.query(sql, args))[0].n);
    return {
      cards: await n("SELECT COUNT(*) AS n FROM cards WHERE account_id = ?"),
      approvals: await n("SELECT COUNT(*) AS n FROM approvals WHERE account_id = ?"),
      idempotency: await n("SELECT COUNT(*) AS n FROM idempotency_keys", []),
      payments: await n("SELECT COUNT(*) AS n FROM payments WHERE account_id = ?"),
      policies: JSON.stringify(await s.query("SELECT approval_required, max_amount_cents, updated_at FROM policies WHERE account_id = ? ORDER BY mode", [accountId])),
      holds: await s.processor.holdCount(),
    };
  };

  /** [name, account set-up and policy, request, decision, reason codes, status of POST /v1/cards, its error code]. */
  const cases: [string, { setup?: Setup; policy?: object; role?: "full" | "agent" }, object, string, string[], number, string?][] = [
    ["within the default policy", {}, { amount_cents: 2500 }, "issue", [], 201],
    ["exactly the maximum", { policy: { max_amount_cents: 2000 } }, { amount_cents: 2000, agent_id: "a-1" }, "issue", [], 201],
    ["policy requires approval", { policy: { approval_required: true } }, { amount_cents: 1200 }, "approval_required", ["approval_required"], 202],
    ["override asks for approval", {}, { amount_cents: 1200, policy_override: { approval_required: true } }, "approval_required", ["approval_required"], 202],
    ["override cannot waive approval (agent key)", { policy: { approval_required: true }, role: "agent" }, { amount_cents: 100, policy_override: { approval_required: false } }, "approval_required", ["approval_required"], 202],
    ["over the default maximum", { policy: { max_amount_cents: 2000 } }, { amount_cents: 2001 }, "denied", ["amount_over_max"], 403, "policy_violation"],
    ["over the override's maximum", {}, { amount_cents: 1500, policy_override: { max_amount_cents: 1000 } }, "denied", ["amount_over_max"], 403, "policy_violation"],
    ["override cannot raise the maximum", { policy: { max_amount_cents: 2000 } }, { amount_cents: 2500, policy_override: { max_amount_cents: 40000 } }, "denied", ["amount_over_max"], 403, "policy_violation"],
    ["an override above the largest card has no effect", {}, { amount_cents: 2500, policy_override: { max_amount_cents: 1_000_000 } }, "issue", [], 201],
    ["an override of 0 tightens to nothing", {}, { amount_cents: 1, policy_override: { max_amount_cents: 0 } }, "denied", ["amount_over_max"], 403, "policy_violation"],
    ["over the maximum and approval required", { policy: { approval_required: true, max_amount_cents: 500 } }, { amount_cents: 600 }, "denied", ["amount_over_max", "approval_required"], 403, "policy_violation"],
    ["kyb missing", { setup: { kyb: false } }, { amount_cents: 500 }, "denied", ["setup_required"], 403, "setup_required"],
    ["set-up missing comes before the maximum", { setup: { kyb: false, paymentMethod: null }, policy: { max_amount_cents: 100 } }, { amount_cents: 500 }, "denied", ["setup_required", "amount_over_max"], 403, "setup_required"],
  ];

  for (const [name, setup, body, decision, codes, status, errorCode] of cases)
    it(`${name}: check says ${decision}, and POST /v1/cards then answers ${status}`, async () => {
      const { account, key } = await fresh(setup);
      const before = await footprint(account.id);
      const r = await check(key, body);
      expect(r.status).toBe(200);
      expectKeys(r.body, ["decision", "reasons", "effective_policy"]);
      expect(r.body.decision).toBe(decision);
      expect(r.body.reasons.map((x: any) => x.code)).toEqual(codes);
      for (const reason of r.body.reasons) {
        expectKeys(reason, ["code", "message", "details"]);
        expect(reason.message).toEqual(expect.any(String));
      }
      // A dry run: nothing written, nothing held.
      expect(await footprint(account.id)).toEqual(before);

      const made = await create(key, body);
      expect(made.status).toBe(status);
      const outcome = { 201: "issue", 202: "approval_required", 403: "denied" }[made.status as 201 | 202 | 403];
      expect(outcome).toBe(r.body.decision);
      if (errorCode) {
        const err = expectError(made, 403, errorCode);
        // The first reason is the error creation answers, with the same details.
        expect(r.body.reasons[0].code).toBe(errorCode === "policy_violation" ? "amount_over_max" : "setup_required");
        expect(r.body.reasons[0].details).toEqual(err.details);
        expect(r.body.reasons[0].message).toBe(err.message);
      }
    });

  it("reports the effective policy and the reasons' details", async () => {
    const { key } = await fresh({ policy: { max_amount_cents: 3000 } });
    const ok = await check(key, { amount_cents: 2500, policy_override: { max_amount_cents: 2500, approval_required: true } });
    expect(ok.body).toEqual({
      decision: "approval_required",
      reasons: [{ code: "approval_required", message: "The request's policy_override asks for a human's approval.", details: { source: "policy_override" } }],
      effective_policy: { approval_required: true, max_amount_cents: 2500 },
    });
    const over = await check(key, { amount_cents: 2600, policy_override: { max_amount_cents: 2500 } });
    expect(over.body).toEqual({
      decision: "denied",
      reasons: [
        {
          code: "amount_over_max",
          message: "The amount 2600 cents exceeds the policy maximum of 2500 cents.",
          details: { max_amount_cents: 2500, requested: 2600 },
        },
      ],
      effective_policy: { approval_required: false, max_amount_cents: 2500 },
    });
    const { key: unset } = await fresh({ setup: { paymentMethod: null } });
    const setup = await check(unset, { amount_cents: 100 });
    expect(setup.body.reasons).toEqual([
      { code: "setup_required", message: expect.stringContaining("payment_method"), details: { missing: ["payment_method"], setup_url: "http://cardctl.test/setup" } },
    ]);
    const policy = await fresh({ policy: { approval_required: true } });
    expect((await check(policy.key, { amount_cents: 100 })).body.reasons).toEqual([
      { code: "approval_required", message: "The default policy requires a human's approval for new cards.", details: { source: "policy" } },
    ]);
  });

  it("ignores Idempotency-Key: repeats answer afresh, store nothing, and leave the key free for a create", async () => {
    const { account, key } = await fresh();
    const headers = { "idempotency-key": "check-then-create-1" };
    const first = await check(key, { amount_cents: 700 }, headers);
    expect(first.status).toBe(200);
    expect(first.body.decision).toBe("issue");
    expect(first.headers.get("idempotent-replayed")).toBeNull();
    expect((await s.request("PUT", "/v1/policies/default", { key, body: { approval_required: true } })).status).toBe(200);
    const again = await check(key, { amount_cents: 700 }, headers);
    expect(again.status).toBe(200);
    expect(again.headers.get("idempotent-replayed")).toBeNull();
    expect(again.body.decision).toBe("approval_required");
    // Another body under the same key is no reuse (422) either.
    expect((await check(key, { amount_cents: 900 }, headers)).status).toBe(200);
    // Even a key a POST would refuse (200 characters) is ignored.
    expect((await check(key, { amount_cents: 900 }, { "idempotency-key": "k".repeat(200) })).status).toBe(200);
    expect(await s.query("SELECT idem_key FROM idempotency_keys WHERE idem_key = ?", ["check-then-create-1"])).toEqual([]);
    // The key is still free: the create with it runs (and its repeat is replayed).
    const made = await s.request("POST", "/v1/cards", { key, body: { amount_cents: 700 }, headers });
    expect(made.status).toBe(202);
    const replay = await s.request("POST", "/v1/cards", { key, body: { amount_cents: 700 }, headers });
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.body).toEqual(made.body);
    expect((await footprint(account.id)).approvals).toBe(1);
  });

  it("is the same on the tRPC transport, key ignored there too", async () => {
    const { key } = await fresh({ policy: { max_amount_cents: 1000 } });
    const t = trpc(s);
    const body = { amount_cents: 1500, agent_id: "agent-9" };
    const rest = await check(key, body);
    const viaTrpc = await t.mutation("policies.check", body, { key, headers: { "idempotency-key": "trpc-check" } });
    expect(viaTrpc.status).toBe(200);
    expect(viaTrpc.body.result.data).toEqual(rest.body);
    expect(viaTrpc.body.result.data.decision).toBe("denied");
    const repeat = await t.mutation("policies.check", { amount_cents: 900 }, { key, headers: { "idempotency-key": "trpc-check" } });
    expect(repeat.body.result.data.decision).toBe("issue");
    expectError(await t.mutation("policies.check", { amount_cents: 0 }, { key }), 400, "validation_error");
  });

  it("400 validation_error on invalid input, like card creation; 401 without a key", async () => {
    const { key } = await fresh();
    const bad: [unknown, string][] = [
      [{}, "amount_cents"],
      [{ amount_cents: 0 }, "amount_cents"],
      [{ amount_cents: 50001 }, "amount_cents"],
      [{ amount_cents: 12.5 }, "amount_cents"],
      [{ amount_cents: "100" }, "amount_cents"],
      [{ amount_cents: 100, agent_id: "" }, "agent_id"],
      [{ amount_cents: 100, agent_id: "a".repeat(256) }, "agent_id"],
      [{ amount_cents: 100, policy_override: { max_amount_cents: -5 } }, "policy_override.max_amount_cents"],
      [{ amount_cents: 100, policy_override: { approval_required: "false" } }, "policy_override.approval_required"],
      [{ amount_cents: 100, purpose: "not a check field" }, ""],
    ];
    for (const [body, path] of bad) {
      const err = expectError(await check(key, body), 400, "validation_error");
      if (path) expect(err.details.issues.map((i: any) => i.path), JSON.stringify(body)).toContain(path);
      // Creation refuses the same input the same way (purpose aside, which it takes).
      if (path) expect((await create(key, body)).status).toBe(400);
    }
    expectError(await s.request("POST", "/v1/policies/check", { key: null, body: { amount_cents: 100 } }), 401, "unauthorized");
  });
});
