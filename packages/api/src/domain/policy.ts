export interface PolicyValues {
  approval_required: boolean;
  max_amount_cents: number;
}

export interface PolicyOverride {
  approval_required?: boolean;
  max_amount_cents?: number;
}

export const DEFAULT_POLICY: PolicyValues = { approval_required: false, max_amount_cents: 50000 };

/** A per-request override can only tighten the owner's default: an agent cannot loosen it. */
export function effectivePolicy(base: PolicyValues, override?: PolicyOverride | null): PolicyValues {
  return {
    approval_required: base.approval_required || override?.approval_required === true,
    max_amount_cents:
      override?.max_amount_cents === undefined ? base.max_amount_cents : Math.min(base.max_amount_cents, override.max_amount_cents),
  };
}
