/**
 * Every event type, in the order of the lifecycle they describe. Its own module, without zod, so the
 * dashboard can import the list ("@cardctl/contract/event-types") without bundling the schemas.
 */
export const EVENT_TYPES = [
  "card.created",
  "card.used",
  "card.reopened",
  "card.closed",
  "card.expired",
  "approval.created",
  "approval.approved",
  "approval.rejected",
  "approval.expired",
  "authorization.approved",
  "authorization.declined",
  "transaction.created",
  "hold.captured",
  "hold.released",
  "payment.uncollected",
  "processor.attention_needed",
  "account.payment_method_updated",
  "api_key.created",
  "api_key.revoked",
  "policy.updated",
  "webhook_endpoint.created",
  "webhook_endpoint.updated",
  "webhook_endpoint.secret_rotated",
  "webhook_endpoint.disabled",
  "webhook_endpoint.enabled",
  "webhook_endpoint.deleted",
  "webhook_delivery.retried",
] as const;
