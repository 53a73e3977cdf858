export {
  Cardctl,
  Cards,
  BalanceResource,
  Policies,
  Approvals,
  TestHelpers,
  type ApprovalDecision,
  type CreateAndWaitResult,
  type WaitOptions,
  type ListParams,
  type CardListQuery,
  type ApprovalListQuery,
} from "./client.js";
export type { ClientOptions, RequestOptions, Fetch } from "./core.js";
export { Page, PagePromise } from "./pagination.js";
export * from "./errors.js";
export type * from "./types.js";
export * as schemas from "@cardctl/contract";
