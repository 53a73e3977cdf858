import { AccountService } from "./accounts.js";
import { ApprovalService } from "./approvals.js";
import { CardService } from "./cards.js";
import type { Deps } from "./deps.js";
import { EventService } from "./events.js";
import { IdempotencyStore } from "./idempotency.js";
import { CardIssuer } from "./issuance.js";
import { CardLifecycle } from "./lifecycle.js";
import { Maintenance } from "./maintenance.js";
import { PaymentQueue } from "./payments.js";
import { OwnerService } from "./owners.js";
import { PolicyService } from "./policies.js";
import { SetupService } from "./setup.js";
import { SpendService } from "./spend.js";
import { WebhookDeliveryQueue } from "./webhook-deliveries.js";
import { WebhookEndpointService } from "./webhook-endpoints.js";

export type Services = ReturnType<typeof createServices>;

export function createServices(deps: Deps) {
  const accounts = new AccountService(deps);
  const owners = new OwnerService(deps);
  const policies = new PolicyService(deps);
  const issuer = new CardIssuer(deps);
  const approvals = new ApprovalService(deps, accounts, issuer);
  const payments = new PaymentQueue(deps, accounts);
  const cards = new CardService(deps, accounts, approvals, issuer);
  const lifecycle = new CardLifecycle(deps, accounts, cards, payments);
  const idempotency = new IdempotencyStore(deps);
  const events = new EventService(deps);
  const webhookEndpoints = new WebhookEndpointService(deps);
  const webhookDeliveries = new WebhookDeliveryQueue(deps);
  const maintenance = new Maintenance(accounts, approvals, cards, issuer, idempotency, lifecycle, payments, events, owners, webhookDeliveries);
  const spend = new SpendService(deps);
  const setup = new SetupService(deps, accounts);
  return { deps, accounts, setup, owners, policies, approvals, cards, lifecycle, payments, idempotency, events, maintenance, webhookEndpoints, webhookDeliveries, spend };
}
