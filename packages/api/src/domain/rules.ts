import type { Account } from "../db/entities.js";
import { missingSetup, type SetupItem, type SetupNeeds } from "./accounts.js";
import { AppError } from "./errors.js";
import { effectivePolicy, type PolicyOverride, type PolicyValues } from "./policy.js";

/** "a", "a and b", "a, b and c" */
const listed = (items: string[]) => (items.length < 2 ? items.join("") : `${items.slice(0, -1).join(", ")} and ${items.at(-1)}`);

/** 403 setup_required: details.missing and the URL where set-up is finished. */
export function setupRequired(missing: SetupItem[], publicUrl: string, message?: string): AppError {
  const hint = missing.includes("cardholder")
    ? " The operator sets the cardholder with POST /admin/v1/accounts/:id/cardholder (cardctl accounts set-cardholder)."
    : "";
  return new AppError(403, "setup_required", message ?? `Account setup is incomplete: ${listed(missing)} missing.${hint}`, {
    missing,
    setup_url: `${publicUrl}/setup`,
  });
}

/**
 * Set-up comes before the policy (DESIGN 3.4). `needs` says what the mode's processor needs
 * beyond kyb and a payment method (AccountService.setupNeeds(mode)).
 */
export function assertSetup(account: Account, publicUrl: string, needs: SetupNeeds): void {
  const error = setupError(account, publicUrl, needs);
  if (error) throw error;
}

/** The 403 setup_required of an account whose set-up is incomplete; null when it is complete. */
export function setupError(account: Account, publicUrl: string, needs: SetupNeeds): AppError | null {
  const missing = missingSetup(account, needs);
  return missing.length > 0 ? setupRequired(missing, publicUrl) : null;
}

export function assertPolicy(policy: PolicyValues, amountCents: number): void {
  const error = policyError(policy, amountCents);
  if (error) throw error;
}

/** The 403 policy_violation of an amount over the policy maximum; null when within it. */
export function policyError(policy: PolicyValues, amountCents: number): AppError | null {
  if (amountCents <= policy.max_amount_cents) return null;
  return new AppError(
    403,
    "policy_violation",
    `The amount ${amountCents} cents exceeds the policy maximum of ${policy.max_amount_cents} cents.`,
    { max_amount_cents: policy.max_amount_cents, requested: amountCents },
  );
}

export type IssuanceOutcome = "issue" | "approval_required" | "denied";

/** One finding of the checks, machine-readable (`code`) with the same details as the matching 403. */
export type DecisionReason =
  | { code: "setup_required"; message: string; details: { missing: SetupItem[]; setup_url: string } }
  | { code: "amount_over_max"; message: string; details: { max_amount_cents: number; requested: number } }
  | { code: "approval_required"; message: string; details: { source: "policy" | "policy_override" } };

export interface IssuanceDecision {
  decision: IssuanceOutcome;
  /** Every check that applies, in the order of checks (set-up, maximum, approval). */
  reasons: DecisionReason[];
  effective_policy: PolicyValues;
  /** When denied: the error POST /v1/cards answers with, the first failing check (DESIGN 3.4). */
  error: AppError | null;
}

export interface IssuanceRequest {
  amount_cents: number;
  policy_override?: PolicyOverride | null;
}

/**
 * The decision on a card request, the one place it is made: POST /v1/cards acts on it and
 * POST /v1/policies/check (dry run) reports it, so the two always agree. Order of checks
 * (DESIGN 3.4): setup_required 403 → policy_violation 403 → approval 202 → issue 201.
 */
export function decideIssuance(
  state: { account: Account; base: PolicyValues; needs: SetupNeeds; publicUrl: string },
  request: IssuanceRequest,
): IssuanceDecision {
  const policy = effectivePolicy(state.base, request.policy_override);
  const setup = setupError(state.account, state.publicUrl, state.needs);
  const maximum = policyError(policy, request.amount_cents);
  const reasons: DecisionReason[] = [];
  if (setup) reasons.push({ code: "setup_required", message: setup.message, details: setup.details as { missing: SetupItem[]; setup_url: string } });
  if (maximum)
    reasons.push({ code: "amount_over_max", message: maximum.message, details: maximum.details as { max_amount_cents: number; requested: number } });
  if (policy.approval_required) {
    const source = state.base.approval_required ? "policy" : "policy_override";
    reasons.push({
      code: "approval_required",
      message:
        source === "policy"
          ? "The default policy requires a human's approval for new cards."
          : "The request's policy_override asks for a human's approval.",
      details: { source },
    });
  }
  const error = setup ?? maximum;
  return {
    decision: error ? "denied" : policy.approval_required ? "approval_required" : "issue",
    reasons,
    effective_policy: policy,
    error,
  };
}
