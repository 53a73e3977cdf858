import type { Account } from "../db/entities.js";
import { missingSetup, type SetupItem, type SetupNeeds } from "./accounts.js";
import { AppError } from "./errors.js";
import type { PolicyValues } from "./policy.js";

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
  const missing = missingSetup(account, needs);
  if (missing.length > 0) throw setupRequired(missing, publicUrl);
}

export function assertPolicy(policy: PolicyValues, amountCents: number): void {
  if (amountCents > policy.max_amount_cents)
    throw new AppError(
      403,
      "policy_violation",
      `The amount ${amountCents} cents exceeds the policy maximum of ${policy.max_amount_cents} cents.`,
      { max_amount_cents: policy.max_amount_cents, requested: amountCents },
    );
}
