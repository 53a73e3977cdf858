import type { Account } from "../db/entities.js";
import { missingSetup } from "./accounts.js";
import { AppError } from "./errors.js";
import type { PolicyValues } from "./policy.js";

export function assertSetup(account: Account, publicUrl: string): void {
  const missing = missingSetup(account);
  if (missing.length > 0)
    throw new AppError(403, "setup_required", `Account setup is incomplete: ${missing.join(" and ")} missing.`, {
      missing,
      setup_url: `${publicUrl}/setup`,
    });
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
