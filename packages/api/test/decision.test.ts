import { describe, expect, it } from "vitest";
import type { Account } from "../src/db/entities.js";
import { decideIssuance } from "../src/domain/rules.js";

/** decideIssuance: the one decision behind POST /v1/cards and POST /v1/policies/check. */
const account = (o: Partial<Account> = {}): Account => ({
  id: "acct_1",
  name: "A",
  kyb_verified: true,
  payment_method: "pm_card_visa",
  cardholder: null,
  created_at: 0,
  ...o,
});
const state = (o: { account?: Partial<Account>; approval?: boolean; max?: number; cardholder?: boolean } = {}) => ({
  account: account(o.account),
  base: { approval_required: o.approval ?? false, max_amount_cents: o.max ?? 50000 },
  needs: { cardholder: o.cardholder ?? false },
  publicUrl: "https://cards.example",
});
const codes = (d: ReturnType<typeof decideIssuance>) => d.reasons.map((r) => r.code);

describe("decideIssuance", () => {
  it("issue within the policy, with no reasons and no error", () => {
    const d = decideIssuance(state({ max: 1000 }), { amount_cents: 1000 });
    expect(d).toEqual({ decision: "issue", reasons: [], effective_policy: { approval_required: false, max_amount_cents: 1000 }, error: null });
  });

  it("approval from the policy or the override; an override cannot waive it", () => {
    expect(decideIssuance(state({ approval: true }), { amount_cents: 1, policy_override: { approval_required: false } }).reasons).toEqual([
      { code: "approval_required", message: expect.any(String), details: { source: "policy" } },
    ]);
    const d = decideIssuance(state(), { amount_cents: 1, policy_override: { approval_required: true } });
    expect(d.decision).toBe("approval_required");
    expect(d.reasons[0]!.details).toEqual({ source: "policy_override" });
    expect(d.error).toBeNull();
  });

  it("denied over the effective maximum: the 403 policy_violation is the error, its details the reason's", () => {
    const d = decideIssuance(state({ max: 2000, approval: true }), { amount_cents: 1500, policy_override: { max_amount_cents: 1000 } });
    expect(d.decision).toBe("denied");
    expect(codes(d)).toEqual(["amount_over_max", "approval_required"]);
    expect(d.effective_policy).toEqual({ approval_required: true, max_amount_cents: 1000 });
    expect(d.error).toMatchObject({ status: 403, code: "policy_violation", details: { max_amount_cents: 1000, requested: 1500 } });
    expect(d.reasons[0]).toEqual({ code: "amount_over_max", message: d.error!.message, details: d.error!.details });
    // An override above the default changes nothing.
    expect(decideIssuance(state({ max: 2000 }), { amount_cents: 2500, policy_override: { max_amount_cents: 40000 } }).effective_policy.max_amount_cents).toBe(2000);
  });

  it("set-up comes first: its 403 is the error, and the cardholder counts when the processor needs one", () => {
    const d = decideIssuance(state({ account: { kyb_verified: false }, max: 100, cardholder: true }), { amount_cents: 500 });
    expect(d.decision).toBe("denied");
    expect(codes(d)).toEqual(["setup_required", "amount_over_max"]);
    expect(d.error).toMatchObject({ status: 403, code: "setup_required" });
    expect(d.reasons[0]!.details).toEqual({ missing: ["kyb", "cardholder"], setup_url: "https://cards.example/setup" });
  });
});
