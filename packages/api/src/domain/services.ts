import { AccountService } from "./accounts.js";
import { ApprovalService } from "./approvals.js";
import { CardService } from "./cards.js";
import type { Deps } from "./deps.js";
import { IdempotencyStore } from "./idempotency.js";
import { CardIssuer } from "./issuance.js";
import { Maintenance } from "./maintenance.js";
import { PolicyService } from "./policies.js";

export type Services = ReturnType<typeof createServices>;

export function createServices(deps: Deps) {
  const accounts = new AccountService(deps);
  const policies = new PolicyService(deps);
  const issuer = new CardIssuer(deps);
  const approvals = new ApprovalService(deps, accounts, policies, issuer);
  const cards = new CardService(deps, accounts, policies, approvals, issuer);
  const idempotency = new IdempotencyStore(deps);
  const maintenance = new Maintenance(accounts, approvals, cards, issuer, idempotency);
  return { deps, accounts, policies, approvals, cards, idempotency, maintenance };
}
