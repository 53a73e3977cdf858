export {
  Cardctl,
  Cards,
  BalanceResource,
  ApiKeys,
  Policies,
  Approvals,
  Authorizations,
  Transactions,
  TestHelpers,
  Events,
  WebhookEndpoints,
  type ApprovalDecision,
  type ApprovalState,
  type CreateAndWaitResult,
  type WaitOptions,
  type ListParams,
  type CardListQuery,
  type ApprovalListQuery,
  type ListByCardQuery,
  type EventListQuery,
  type WebhookEndpointListQuery,
  type WebhookDeliveryListQuery,
} from "./client.js";
export type { EventStreamOptions } from "./event-stream.js";
export type { ClientOptions, RequestOptions, Fetch } from "./core.js";
export { Page, PagePromise } from "./pagination.js";
export * from "./errors.js";
export type * from "./types.js";
export * as schemas from "@cardctl/contract";
// From its own module: a bundle that uses only this does not take the schemas (and zod) with it.
export { formatMoney } from "@cardctl/contract/money";
