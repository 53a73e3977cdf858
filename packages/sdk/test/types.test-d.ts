/**
 * Compile-time contract test, checked by `npm run typecheck` (tsc): the SDK's request and response
 * types must equal what the server's tRPC router infers. When a procedure's input or output
 * changes shape, this file stops compiling and the build breaks.
 */
import type { AppRouter } from "@cardctl/api";
import type { inferRouterInputs, inferRouterOutputs } from "@trpc/server";
import type {
  ApprovalListQuery,
  CardListQuery,
  Cardctl,
  PagePromise,
  RequestOptions,
} from "../src/index.js";
import type * as T from "../src/types.js";

type In = inferRouterInputs<AppRouter>;
type Out = inferRouterOutputs<AppRouter>;

/** Exact type equality (not mere mutual assignability). */
type Equals<A, B> = (<G>() => G extends A ? 1 : 2) extends <G>() => G extends B ? 1 : 2 ? true : false;
type Assert<T extends true> = T;
/** `A` may be passed where `B` is expected. */
type Extends<A, B> = [A] extends [B] ? true : false;
/** Assignable both ways (for `Omit<…> & {id}` recombinations, which are not syntactically equal). */
type Mutual<A, B> = Extends<A, B> extends true ? Extends<B, A> : false;

// ---- inputs: the SDK's types are the router's inputs ----
export type InputChecks = [
  Assert<Equals<T.CardCreateParams, In["cards"]["create"]>>,
  Assert<Equals<T.CardListParams, In["cards"]["list"]>>,
  Assert<Equals<T.CardRetrieveInput, In["cards"]["get"]>>,
  Assert<Equals<T.CardCloseInput, In["cards"]["close"]>>,
  Assert<Equals<T.PolicyUpdateParams, In["policies"]["updateDefault"]>>,
  Assert<Equals<T.PolicyCheckParams, In["policies"]["check"]>>,
  Assert<Equals<T.ApprovalListParams, In["approvals"]["list"]>>,
  Assert<Equals<T.ApprovalApproveInput, In["approvals"]["approve"]>>,
  Assert<Equals<T.ApprovalRejectInput, In["approvals"]["reject"]>>,
  Assert<Equals<T.PurchaseInput, In["testHelpers"]["purchase"]>>,
  // path parameter + the rest is the router's input
  Assert<Mutual<T.CardRetrieveParams & { id: string }, In["cards"]["get"]>>,
  Assert<Mutual<T.ApprovalRejectParams & { id: string }, In["approvals"]["reject"]>>,
  Assert<Mutual<T.PurchaseParams & { id: string }, In["testHelpers"]["purchase"]>>,
  Assert<Equals<T.ListByCardParams, In["authorizations"]["list"]>>,
  Assert<Equals<T.ListByCardParams, In["transactions"]["list"]>>,
  Assert<Equals<T.EventListParams, In["events"]["list"]>>,
  Assert<Equals<T.WebhookEndpointCreateParams, In["webhookEndpoints"]["create"]>>,
  Assert<Equals<T.WebhookEndpointListParams, In["webhookEndpoints"]["list"]>>,
  Assert<Mutual<T.WebhookEndpointUpdateParams & { id: string }, In["webhookEndpoints"]["update"]>>,
  Assert<Mutual<T.WebhookSecretRotateParams & { id: string }, In["webhookEndpoints"]["rotateSecret"]>>,
  Assert<Mutual<T.WebhookDeliveryListParams & { id: string }, In["webhookEndpoints"]["deliveries"]>>,
  Assert<Mutual<T.TestAuthorizeParams & { id: string }, In["testHelpers"]["authorize"]>>,
  Assert<Mutual<T.TestCaptureParams & { id: string }, In["testHelpers"]["capture"]>>,
  Assert<Mutual<T.TestRefundParams & { id: string }, In["testHelpers"]["refund"]>>,
  // the narrowed list queries (limit: number) are still valid router inputs
  Assert<Extends<CardListQuery, In["cards"]["list"]>>,
  Assert<Extends<ApprovalListQuery, In["approvals"]["list"]>>,
  // endpoints without input take nothing
  Assert<Extends<undefined, In["balance"]["retrieve"]>>,
  Assert<Extends<undefined, In["policies"]["retrieveDefault"]>>,
  Assert<Extends<undefined, In["apiKeys"]["current"]>>,
];

// ---- outputs: the SDK's types are the router's outputs ----
export type OutputChecks = [
  Assert<Equals<T.CardCreateResult, Out["cards"]["create"]>>,
  Assert<Equals<T.ListResponse<T.Card>, Out["cards"]["list"]>>,
  Assert<Equals<T.CardDetail, Out["cards"]["get"]>>,
  Assert<Equals<T.CardCloseResult, Out["cards"]["close"]>>,
  Assert<Equals<T.Balance, Out["balance"]["retrieve"]>>,
  Assert<Equals<T.CurrentApiKey, Out["apiKeys"]["current"]>>,
  Assert<Equals<T.Policy, Out["policies"]["retrieveDefault"]>>,
  Assert<Equals<T.Policy, Out["policies"]["updateDefault"]>>,
  Assert<Equals<T.PolicyCheckResult, Out["policies"]["check"]>>,
  Assert<Equals<T.PolicyCheckDecision, Out["policies"]["check"]["decision"]>>,
  Assert<Equals<T.PolicyCheckReason, Out["policies"]["check"]["reasons"][number]>>,
  Assert<Equals<T.ListResponse<T.Approval>, Out["approvals"]["list"]>>,
  Assert<Equals<T.CardCreated, Out["approvals"]["approve"]>>,
  Assert<Equals<T.ApprovalRejectResult, Out["approvals"]["reject"]>>,
  Assert<Equals<T.PurchaseResult, Out["testHelpers"]["purchase"]>>,
  Assert<Equals<T.ListResponse<T.Authorization>, Out["authorizations"]["list"]>>,
  Assert<Equals<T.ListResponse<T.Transaction>, Out["transactions"]["list"]>>,
  Assert<Equals<T.Authorization, Out["testHelpers"]["authorize"]>>,
  Assert<Equals<T.Transaction, Out["testHelpers"]["capture"]>>,
  Assert<Equals<T.Transaction, Out["testHelpers"]["refund"]>>,
  Assert<Equals<T.Card, Out["testHelpers"]["expireHold"]>>,
  Assert<Equals<T.ListResponse<T.Event>, Out["events"]["list"]>>,
  Assert<Equals<T.Event, Out["events"]["get"]>>,
  Assert<Equals<T.CreatedWebhookEndpoint, Out["webhookEndpoints"]["create"]>>,
  Assert<Equals<T.ListResponse<T.WebhookEndpoint>, Out["webhookEndpoints"]["list"]>>,
  Assert<Equals<T.DeletedWebhookEndpoint, Out["webhookEndpoints"]["delete"]>>,
  Assert<Equals<T.WebhookEndpoint, Out["webhookEndpoints"]["get"]>>,
  Assert<Equals<T.WebhookEndpoint, Out["webhookEndpoints"]["update"]>>,
  Assert<Equals<T.CreatedWebhookEndpoint, Out["webhookEndpoints"]["rotateSecret"]>>,
  Assert<Equals<T.ListResponse<T.WebhookDelivery>, Out["webhookEndpoints"]["deliveries"]>>,
  Assert<Equals<T.WebhookDelivery, Out["webhookEndpoints"]["retry"]>>,
];

// ---- the client's methods use exactly those types ----
type Args<F> = F extends (...a: infer A) => unknown ? A : never;
type Ret<F> = F extends (...a: never[]) => infer R ? R : never;
type C = Cardctl;
export type MethodChecks = [
  Assert<Equals<Args<C["cards"]["create"]>, [params: In["cards"]["create"], options?: RequestOptions]>>,
  Assert<Equals<Ret<C["cards"]["create"]>, Promise<Out["cards"]["create"]>>>,
  Assert<Equals<Ret<C["cards"]["list"]>, PagePromise<Out["cards"]["list"]["data"][number]>>>,
  Assert<Equals<Ret<C["cards"]["get"]>, Promise<Out["cards"]["get"]>>>,
  Assert<Equals<Ret<C["cards"]["close"]>, Promise<Out["cards"]["close"]>>>,
  Assert<Equals<Ret<C["balance"]["retrieve"]>, Promise<Out["balance"]["retrieve"]>>>,
  Assert<Equals<Ret<C["apiKeys"]["current"]>, Promise<Out["apiKeys"]["current"]>>>,
  Assert<Equals<Ret<C["policies"]["retrieveDefault"]>, Promise<Out["policies"]["retrieveDefault"]>>>,
  Assert<Equals<Args<C["policies"]["updateDefault"]>, [params: In["policies"]["updateDefault"], options?: RequestOptions]>>,
  Assert<Equals<Ret<C["policies"]["updateDefault"]>, Promise<Out["policies"]["updateDefault"]>>>,
  Assert<Equals<Args<C["policies"]["check"]>, [params: In["policies"]["check"], options?: RequestOptions]>>,
  Assert<Equals<Ret<C["policies"]["check"]>, Promise<Out["policies"]["check"]>>>,
  Assert<Equals<Ret<C["approvals"]["list"]>, PagePromise<Out["approvals"]["list"]["data"][number]>>>,
  Assert<Equals<Ret<C["approvals"]["approve"]>, Promise<Out["approvals"]["approve"]>>>,
  Assert<Equals<Ret<C["approvals"]["reject"]>, Promise<Out["approvals"]["reject"]>>>,
  Assert<Equals<Ret<C["testHelpers"]["purchase"]>, Promise<Out["testHelpers"]["purchase"]>>>,
  Assert<Equals<Ret<C["authorizations"]["list"]>, PagePromise<Out["authorizations"]["list"]["data"][number]>>>,
  Assert<Equals<Ret<C["transactions"]["list"]>, PagePromise<Out["transactions"]["list"]["data"][number]>>>,
  Assert<Equals<Ret<C["testHelpers"]["capture"]>, Promise<Out["testHelpers"]["capture"]>>>,
  Assert<Equals<Ret<C["events"]["list"]>, PagePromise<Out["events"]["list"]["data"][number]>>>,
  Assert<Equals<Ret<C["events"]["get"]>, Promise<Out["events"]["get"]>>>,
  Assert<Equals<Args<C["webhookEndpoints"]["create"]>, [params: In["webhookEndpoints"]["create"], options?: RequestOptions]>>,
  Assert<Equals<Ret<C["webhookEndpoints"]["create"]>, Promise<Out["webhookEndpoints"]["create"]>>>,
  Assert<Equals<Ret<C["webhookEndpoints"]["list"]>, PagePromise<Out["webhookEndpoints"]["list"]["data"][number]>>>,
  Assert<Equals<Ret<C["webhookEndpoints"]["del"]>, Promise<Out["webhookEndpoints"]["delete"]>>>,
  Assert<Equals<Ret<C["webhookEndpoints"]["get"]>, Promise<Out["webhookEndpoints"]["get"]>>>,
  Assert<Equals<Ret<C["webhookEndpoints"]["update"]>, Promise<Out["webhookEndpoints"]["update"]>>>,
  Assert<Equals<Ret<C["webhookEndpoints"]["rotateSecret"]>, Promise<Out["webhookEndpoints"]["rotateSecret"]>>>,
  Assert<Equals<Ret<C["webhookEndpoints"]["deliveries"]>, PagePromise<Out["webhookEndpoints"]["deliveries"]["data"][number]>>>,
  Assert<Equals<Ret<C["webhookEndpoints"]["retry"]>, Promise<Out["webhookEndpoints"]["retry"]>>>,
];

// ---- the create result discriminates on `status` ----
declare const created: T.CardCreateResult;
if (created.status === "PENDING_APPROVAL") {
  const approvalId: string = created.approval_id;
  void approvalId;
  // @ts-expect-error a pending approval has no card id
  void created.id;
} else {
  const cardId: string = created.id;
  void cardId;
}

// ---- a policy check's reasons discriminate on `code` ----
declare const reason: T.PolicyCheckReason;
if (reason.code === "amount_over_max") {
  const max: number = reason.details.max_amount_cents;
  void max;
  // @ts-expect-error only setup_required names what is missing
  void reason.details.missing;
} else if (reason.code === "setup_required") {
  const missing: ("kyb" | "payment_method" | "cardholder")[] = reason.details.missing;
  void missing;
} else {
  const source: "policy" | "policy_override" = reason.details.source;
  void source;
}
// @ts-expect-error the decision is one of three
const wrong: T.PolicyCheckDecision = "approved";
void wrong;
