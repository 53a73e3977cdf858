/**
 * Every request and response type of the SDK, derived from the zod schemas of the REST contract
 * (`@cardctl/contract`, the same schemas the server's tRPC router validates with). Nothing here is
 * written by hand: `test/types.test-d.ts` asserts that these equal
 * `inferRouterInputs/inferRouterOutputs<AppRouter>`, so a change of the router breaks the build.
 */
import type { z } from "zod";
import type * as s from "@cardctl/contract";

// ---- requests (z.input: what the caller may send; defaults are optional) ----

/** Body of `POST /v1/cards`. */
export type CardCreateParams = z.input<typeof s.createCardInput>;
/** Query of `GET /v1/cards` (`limit` 1..100, default 20; `starting_after` is the paging cursor). */
export type CardListParams = z.input<typeof s.listCardsInput>;
/** Input of `GET /v1/cards/{id}` (the id travels in the path, `nonce` in the query). */
export type CardRetrieveInput = z.input<typeof s.getCardInput>;
/** Query of `GET /v1/cards/{id}`. */
export type CardRetrieveParams = Omit<CardRetrieveInput, "id">;
/** Input of `POST /v1/cards/{id}/close`. */
export type CardCloseInput = z.input<typeof s.cardIdInput>;
/** Body of `PUT /v1/policies/default` (both members optional). */
export type PolicyUpdateParams = z.input<typeof s.updatePolicyInput>;
/** Body of `POST /v1/policies/check` (dry run): `amount_cents`, and optionally `agent_id` and `policy_override`, as for a card. */
export type PolicyCheckParams = z.input<typeof s.policyCheckInput>;
/** Query of `GET /v1/approvals` (`status` defaults to PENDING). */
export type ApprovalListParams = z.input<typeof s.listApprovalsInput>;
/** Input of `POST /v1/approvals/{id}/approve`. */
export type ApprovalApproveInput = z.input<typeof s.approvalIdInput>;
/** Input of `POST /v1/approvals/{id}/reject`. */
export type ApprovalRejectInput = z.input<typeof s.rejectInput>;
/** Body of `POST /v1/approvals/{id}/reject`. */
export type ApprovalRejectParams = Omit<ApprovalRejectInput, "id">;
/** Input of `POST /v1/test_helpers/cards/{id}/purchase`. */
export type PurchaseInput = z.input<typeof s.purchaseInput>;
/** Body of `POST /v1/test_helpers/cards/{id}/purchase`. */
export type PurchaseParams = Omit<PurchaseInput, "id">;

/** Query of `GET /v1/authorizations` and `GET /v1/transactions` (`card_id` filters by card). */
export type ListByCardParams = z.input<typeof s.listByCardInput>;
/** Body of `POST /v1/test_helpers/cards/{id}/authorizations`. */
export type TestAuthorizeParams = Omit<z.input<typeof s.testAuthorizeInput>, "id">;
/** Body of `POST /v1/test_helpers/authorizations/{id}/capture`. */
export type TestCaptureParams = Omit<z.input<typeof s.testCaptureInput>, "id">;
/** Body of `POST /v1/test_helpers/transactions/{id}/refund`. */
export type TestRefundParams = Omit<z.input<typeof s.testRefundInput>, "id">;

// ---- responses (z.output: what the server returns) ----

/** A card as issued (201 of `POST /v1/cards` and of approve). */
export type CardCreated = z.output<typeof s.cardCreated>;
/** The 202 of `POST /v1/cards`: the policy requires a human's approval; no card yet. */
export type PendingApproval = z.output<typeof s.pendingApproval>;
/** Result of `cards.create`: discriminate on `status` (`"PENDING_APPROVAL"` or a card status). */
export type CardCreateResult = z.output<typeof s.createCardOutput>;
/** An item of `GET /v1/cards`. */
export type Card = z.output<typeof s.cardListItem>;
/** `GET /v1/cards/{id}`: the card with an ephemeral key secret to reveal PAN/CVV client-side. */
export type CardDetail = z.output<typeof s.cardDetail>;
/**
 * Result of `cards.reveal`: the card's number and CVC as the processor returned them to this
 * client (never through the cardctl API). Treat as a secret: do not log or store it.
 */
export interface RevealedCard {
  number: string;
  cvc: string;
  exp_month: number;
  exp_year: number;
  last_four: string;
}
/** Response of `POST /v1/cards/{id}/close`. */
export type CardCloseResult = z.output<typeof s.closeCardOutput>;
/** `GET /v1/balance`. */
export type Balance = z.output<typeof s.balance>;
/** `GET /v1/api_keys/current`: the key making the request (id, account, mode, role). */
export type CurrentApiKey = z.output<typeof s.currentKey>;
/** The default policy. */
export type Policy = z.output<typeof s.policy>;
/**
 * `POST /v1/policies/check`: what `POST /v1/cards` with the same request would do now
 * (`issue`, `approval_required` or `denied`), why, and the effective policy.
 */
export type PolicyCheckResult = z.output<typeof s.policyCheck>;
/** A policy check's decision: `issue` (201), `approval_required` (202) or `denied` (403). */
export type PolicyCheckDecision = z.output<typeof s.policyCheckDecision>;
/** One reason of a policy check; discriminate on `code` (`setup_required`, `amount_over_max`, `approval_required`) for its `details`. */
export type PolicyCheckReason = z.output<typeof s.policyCheckReason>;
/** An approval request. */
export type Approval = z.output<typeof s.approval>;
/** Response of `POST /v1/approvals/{id}/reject`. */
export type ApprovalRejectResult = z.output<typeof s.rejectOutput>;
/** Response of `POST /v1/test_helpers/cards/{id}/purchase`. */
export type PurchaseResult = z.output<typeof s.purchaseOutput>;
/** A merchant's request to charge a card, approved or declined in real time. */
export type Authorization = z.output<typeof s.authorization>;
/** Money that settled on a card (`capture`) or came back from the merchant (`refund`). */
export type Transaction = z.output<typeof s.transaction>;
/** A page of a list endpoint, as the server sends it. */
export type ListResponse<T> = { data: T[]; has_more: boolean };
/** The error envelope of every non-2xx response. */
export type ErrorEnvelope = z.output<typeof s.errorEnvelopeSchema>;

/** Query of `GET /v1/events` (`type` filters; `limit` and `starting_after` page). */
export type EventListParams = z.input<typeof s.listEventsInput>;
/** A state change of the account (`card.created`, `approval.approved`, …) with the resource in `data.object`. */
export type Event = z.output<typeof s.event>;
/** Every event type. */
export type EventType = z.output<typeof s.eventType>;

/** Body of `POST /v1/webhook_endpoints`: `url`, `events` (types, or `["*"]`), `description`. */
export type WebhookEndpointCreateParams = z.input<typeof s.createWebhookEndpointInput>;
/** Body of `POST /v1/webhook_endpoints/{id}`: any of `url`, `events`, `description` (null removes it), `status` (`enabled` / `disabled`). */
export type WebhookEndpointUpdateParams = Omit<z.input<typeof s.updateWebhookEndpointInput>, "id">;
/** Body of `POST /v1/webhook_endpoints/{id}/rotate_secret`: `expire_previous_in_seconds` (default 86,400). */
export type WebhookSecretRotateParams = Omit<z.input<typeof s.rotateWebhookSecretInput>, "id">;
/** Query of `GET /v1/webhook_endpoints`. */
export type WebhookEndpointListParams = z.input<typeof s.listWebhookEndpointsInput>;
/** Query of `GET /v1/webhook_endpoints/{id}/deliveries` (`status` filters). */
export type WebhookDeliveryListParams = Omit<z.input<typeof s.listWebhookDeliveriesInput>, "id">;
/** A webhook endpoint (never its secret). */
export type WebhookEndpoint = z.output<typeof s.webhookEndpoint>;
/** The 201 of `POST /v1/webhook_endpoints` (and the answer of a secret rotation): the endpoint with its signing secret `whsec_…`, shown this once. */
export type CreatedWebhookEndpoint = z.output<typeof s.createdWebhookEndpoint>;
/** `DELETE /v1/webhook_endpoints/{id}`. */
export type DeletedWebhookEndpoint = z.output<typeof s.deletedWebhookEndpoint>;
/** One event's delivery to one endpoint: status, attempts, last answer, next attempt. */
export type WebhookDelivery = z.output<typeof s.webhookDelivery>;

/** Card statuses (`OPEN`, `USED`, `CLOSED`). */
export type CardStatus = z.output<typeof s.cardStatus>;
/** Approval statuses (`PENDING`, `APPROVED`, `REJECTED`, `EXPIRED`). */
export type ApprovalStatus = z.output<typeof s.approvalStatus>;
