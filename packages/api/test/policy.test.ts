import { describe, expect, it } from "vitest";
import { DEFAULT_POLICY, effectivePolicy } from "../src/domain/policy.js";

describe("effectivePolicy: an override can only tighten", () => {
  const base = { approval_required: false, max_amount_cents: 10000 };

  it("is the default without an override", () => {
    expect(effectivePolicy(base)).toEqual(base);
    expect(effectivePolicy(base, {})).toEqual(base);
    expect(DEFAULT_POLICY).toEqual({ approval_required: false, max_amount_cents: 50000 });
  });

  it("lowers the maximum but never raises it", () => {
    expect(effectivePolicy(base, { max_amount_cents: 500 }).max_amount_cents).toBe(500);
    expect(effectivePolicy(base, { max_amount_cents: 50000 }).max_amount_cents).toBe(10000);
  });

  it("can require approval but never waive it", () => {
    expect(effectivePolicy(base, { approval_required: true }).approval_required).toBe(true);
    const strict = { ...base, approval_required: true };
    expect(effectivePolicy(strict, { approval_required: false }).approval_required).toBe(true);
  });
});
