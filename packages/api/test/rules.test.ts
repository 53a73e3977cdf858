import { describe, expect, it } from "vitest";
import type { Account, Approval, Card } from "../src/db/entities.js";
import { missingSetup } from "../src/domain/accounts.js";
import { AppError } from "../src/domain/errors.js";
import { effectivePolicy } from "../src/domain/policy.js";
import { assertPolicy, assertSetup } from "../src/domain/rules.js";
import { approvalView, cardCreatedView, cardDetailView, cardListView } from "../src/domain/views.js";

const account = (o: Partial<Account> = {}): Account => ({
  id: "acct_1",
  name: "A",
  kyb_verified: true,
  payment_method: "pm_card_visa",
  cardholder: null,
  created_at: 0,
  ...o,
});

function thrown(fn: () => void): AppError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(AppError);
    return err as AppError;
  }
  throw new Error("did not throw");
}

describe("setup rule", () => {
  it("lists what is missing, kyb first", () => {
    expect(missingSetup(account(), { cardholder: false })).toEqual([]);
    expect(missingSetup(account({ kyb_verified: false }), { cardholder: false })).toEqual(["kyb"]);
    expect(missingSetup(account({ payment_method: null }), { cardholder: false })).toEqual(["payment_method"]);
    expect(missingSetup(account({ kyb_verified: false, payment_method: null }), { cardholder: false })).toEqual(["kyb", "payment_method"]);
  });

  it("the cardholder is missing only where the processor needs one (Stripe)", () => {
    const stripe = { cardholder: true };
    expect(missingSetup(account(), { cardholder: false })).toEqual([]);
    expect(missingSetup(account(), stripe)).toEqual(["cardholder"]);
    expect(missingSetup(account({ kyb_verified: false, payment_method: null }), stripe)).toEqual(["kyb", "payment_method", "cardholder"]);
    expect(missingSetup(account({ cardholder: "{}" }), stripe)).toEqual([]);
    const err = thrown(() => assertSetup(account({ kyb_verified: false }), "https://x.test", stripe));
    expect(err.details).toEqual({ missing: ["kyb", "cardholder"], setup_url: "https://x.test/setup" });
    expect(err.message).toMatch(/kyb and cardholder missing.*\/admin\/v1\/accounts\/:id\/cardholder/);
  });

  it("403 setup_required with details.missing and setup_url under the public URL", () => {
    expect(() => assertSetup(account(), "https://x.test", { cardholder: false })).not.toThrow();
    const err = thrown(() => assertSetup(account({ payment_method: null }), "https://x.test", { cardholder: false }));
    expect([err.status, err.code]).toEqual([403, "setup_required"]);
    expect(err.details).toEqual({ missing: ["payment_method"], setup_url: "https://x.test/setup" });
  });
});

describe("policy rule", () => {
  it("allows amounts up to the maximum, refuses above with details", () => {
    const policy = { approval_required: false, max_amount_cents: 1000 };
    expect(() => assertPolicy(policy, 1000)).not.toThrow();
    expect(() => assertPolicy(policy, 1)).not.toThrow();
    const err = thrown(() => assertPolicy(policy, 1001));
    expect([err.status, err.code]).toEqual([403, "policy_violation"]);
    expect(err.details).toEqual({ max_amount_cents: 1000, requested: 1001 });
    expect(err.message).toMatch(/exceeds the policy maximum/);
  });

  it("applies to the effective policy: an override tightens, never loosens", () => {
    const base = { approval_required: false, max_amount_cents: 1000 };
    expect(() => assertPolicy(effectivePolicy(base, { max_amount_cents: 5000 }), 2000)).toThrow(AppError);
    expect(() => assertPolicy(effectivePolicy(base, { max_amount_cents: 500 }), 600)).toThrow(AppError);
    expect(effectivePolicy({ ...base, approval_required: true }, { approval_required: false }).approval_required).toBe(true);
  });
});

describe("views: internal state never leaks", () => {
  const card: Card = {
    seq: 1,
    id: "card_1",
    account_id: "acct_1",
    mode: "test",
    status: "OPEN",
    amount_cents: 500,
    remaining_cents: 500,
    spent_cents: 0,
    ledger_version: 0,
    agent_id: "a",
    purpose: null,
    last_four: "4242",
    expiration: "01/30",
    processor_card_id: "ic_1",
    hold_id: "pi_1",
    hold_status: "OPEN",
    approval_id: null,
    creation_key: "k",
    lease_until: null,
    revoked_at: null,
    created_at: Date.UTC(2026, 0, 2, 3, 4, 5, 6),
    closed_at: null,
    used_at: null,
    used_key: null,
    expires_at: Date.UTC(2026, 0, 3, 3, 4, 5, 6),
    recovery_attempts: 0,
    recovery_next_at: null,
    recovery_error: null,
    needs_attention: false,
  };

  it("create, list and detail views have exactly the public fields", () => {
    expect(cardCreatedView(card)).toEqual({
      id: "card_1",
      status: "OPEN",
      last_four: "4242",
      expiration: "01/30",
      spending_limit_cents: 500,
      remaining_cents: 500,
      agent_id: "a",
      created_at: "2026-01-02T03:04:05.006Z",
      expires_at: "2026-01-03T03:04:05.006Z",
      spent_cents: 0,
    });
    expect(Object.keys(cardListView(card)).sort()).toEqual(
      ["agent_id", "amount_cents", "created_at", "expiration", "expires_at", "id", "last_four", "purpose", "remaining_cents", "spent_cents", "status"],
    );
    const detail = cardDetailView({ ...card, status: "CLOSED", closed_at: Date.UTC(2026, 0, 3) }, "ek_test_x", {
      url: "/simulated-processor/v1/issuing/cards/ic_1",
      apiVersion: null,
    });
    expect(detail).toMatchObject({
      status: "CLOSED",
      closed_at: "2026-01-03T00:00:00.000Z",
      processor_card_id: "ic_1",
      ephemeral_key_secret: "ek_test_x",
      reveal: { url: "/simulated-processor/v1/issuing/cards/ic_1", api_version: null },
    });
    for (const hidden of ["hold_id", "hold_status", "creation_key", "used_key", "account_id", "mode", "seq"]) expect(detail).not.toHaveProperty(hidden);
  });

  it("the approval view carries reason and card_id, not internal keys", () => {
    const a: Approval = {
      seq: 1,
      id: "appr_1",
      account_id: "acct_1",
      mode: "test",
      amount_cents: 700,
      agent_id: null,
      purpose: "p",
      override_max_cents: 800,
      status: "APPROVED",
      reason: null,
      card_id: "card_1",
      creation_key: "k",
      expires_at: Date.UTC(2026, 0, 2),
      created_at: Date.UTC(2026, 0, 1),
      decided_at: Date.UTC(2026, 0, 1, 1),
      decision_key: null,
    };
    expect(approvalView(a)).toEqual({
      id: "appr_1",
      amount_cents: 700,
      agent_id: null,
      purpose: "p",
      status: "APPROVED",
      reason: null,
      card_id: "card_1",
      expires_at: "2026-01-02T00:00:00.000Z",
      created_at: "2026-01-01T00:00:00.000Z",
    });
  });
});
