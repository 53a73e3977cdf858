/**
 * Realistic examples for the OpenAPI document (openapi.ts): what Swagger UI shows instead of values
 * made up from the schemas (which gave amounts like -9007199254740991). They walk one story: an
 * agent asks for 25.00 USD, a human approves, the agent spends 19.99. The document's lint
 * (redocly, rule no-invalid-media-type-examples) checks each against its schema.
 */

const T0 = "2026-11-03T14:05:09.000Z";
const T1 = "2026-11-03T14:07:42.000Z";
const EXPIRES = "2026-11-04T14:07:42.000Z";

const CARD_ID = "card_7QpV2mXc9LrT4bYk1NsWd0Ze";
const APPROVAL_ID = "appr_3KfT8wQz1VnB6yHc2MsLd9Xa";
const AUTH_ID = "auth_5RgN0pLs7VdK2qWm9TcB4xYe";
const TXN_ID = "txn_8JmC3vHq6ZsP1bLw4NfR7tGk";
const ACCOUNT_ID = "acct_2WbH5nKs8QdL1vRc7MpT3xZf";
const KEY_ID = "key_6TsM9qBv2LcW5nHd8KrP1zXg";
const EVENT_ID = "evt_4HbN7qTz2XcM9vLd5KsR1wPf";
const ENDPOINT_ID = "we_5KcR8tLm2QxV7nBd4HsW1zPg";
const DELIVERY_ID = "whd_9TqL3vNc6XmB1rKd5HsW8zPg";

const cardCreated = {
  id: CARD_ID,
  status: "OPEN",
  last_four: "4242",
  expiration: "11/29",
  spending_limit_cents: 2500,
  remaining_cents: 2500,
  agent_id: "shopping-agent",
  created_at: T1,
  expires_at: EXPIRES,
  spent_cents: 0,
};

const cardListItem = {
  id: CARD_ID,
  status: "OPEN",
  last_four: "4242",
  expiration: "11/29",
  amount_cents: 2500,
  remaining_cents: 2500,
  agent_id: "shopping-agent",
  purpose: "Domain renewal",
  created_at: T1,
  expires_at: EXPIRES,
  spent_cents: 0,
};

const usedCard = { ...cardListItem, status: "USED", remaining_cents: 0, spent_cents: 1999 };

const approval = {
  id: APPROVAL_ID,
  amount_cents: 2500,
  agent_id: "shopping-agent",
  purpose: "Domain renewal",
  status: "PENDING",
  reason: null,
  card_id: null,
  expires_at: "2026-11-04T14:05:09.000Z",
  created_at: T0,
};

const authorization = {
  id: AUTH_ID,
  card_id: CARD_ID,
  amount_cents: 1999,
  approved: true,
  decline_reason: null,
  status: "pending",
  merchant: { name: "Registrar Inc.", category: "computer_network_services", country: "US" },
  created_at: "2026-11-03T14:12:30.000Z",
};

const transaction = {
  id: TXN_ID,
  card_id: CARD_ID,
  authorization_id: AUTH_ID,
  type: "capture",
  amount_cents: 1999,
  merchant_name: "Registrar Inc.",
  created_at: "2026-11-03T14:12:31.000Z",
};

const account = {
  id: ACCOUNT_ID,
  name: "Acme",
  kyb_verified: true,
  payment_method: "pm_card_visa",
  cardholder: {
    type: "company",
    name: "Acme Robotics",
    email: "ops@acme.example",
    phone_number: null,
    billing: { line1: "1 Main Street", line2: null, city: "Springfield", state: "IL", postal_code: "62701", country: "US" },
    tax_id_last4: "6789",
    updated_at: T0,
  },
  created_at: "2026-11-01T09:00:00.000Z",
};

const apiKey = {
  id: KEY_ID,
  mode: "test",
  role: "agent",
  name: "shopping-agent",
  prefix: "sk_test_",
  last4: "Qm4x",
  created_at: T0,
  revoked_at: null,
};

/** A closed card whose revoke failed 8 times (the operator's follow-up list). */
const attentionCard = {
  id: CARD_ID,
  account_id: ACCOUNT_ID,
  mode: "live",
  status: "CLOSED",
  hold_status: "OPEN",
  recovery_attempts: 8,
  recovery_error: "The card processor failed during revoke: the processor did not answer.",
  created_at: T0,
  closed_at: T1,
};

/** Example of each success response, by "method path status". */
const cardCreatedEvent = {
  id: EVENT_ID,
  object: "event",
  type: "card.created",
  created_at: T1,
  mode: "test",
  actor: { type: "api_key", id: KEY_ID },
  data: { object: cardListItem },
};

const webhookEndpoint = {
  id: ENDPOINT_ID,
  url: "https://example.com/cardctl/webhooks",
  events: ["approval.created", "card.used"],
  description: "Approvals inbox",
  status: "enabled",
  mode: "test",
  previous_secret_expires_at: null,
  created_at: T0,
  updated_at: T0,
};

const webhookDelivery = {
  id: DELIVERY_ID,
  endpoint_id: ENDPOINT_ID,
  event_id: EVENT_ID,
  event_type: "card.created",
  status: "pending",
  attempts: 2,
  last_response_status: 500,
  last_error: "HTTP 500",
  next_attempt_at: "2026-11-03T14:07:52.000Z",
  created_at: T1,
  updated_at: "2026-11-03T14:07:47.000Z",
};

export const SUCCESS_EXAMPLES: Record<string, unknown> = {
  "post /v1/cards 201": cardCreated,
  "post /v1/cards 202": { status: "PENDING_APPROVAL", approval_id: APPROVAL_ID, expires_at: "2026-11-04T14:05:09.000Z" },
  "get /v1/cards 200": { data: [cardListItem], has_more: false },
  "get /v1/cards/{id} 200": {
    ...cardListItem,
    closed_at: null,
    processor_card_id: "ic_1QnZ4sLk8VwT2pRb6MdH0cXy",
    ephemeral_key_secret: "ek_test_YWNjdF8xUW5aNHNMazhWd1QycFJiXzZNZEgwY1h5",
    reveal: { url: "https://api.stripe.com/v1/issuing/cards/ic_1QnZ4sLk8VwT2pRb6MdH0cXy", api_version: "2020-03-02" },
  },
  "post /v1/cards/{id}/close 200": { ok: true, status: "CLOSED" },
  "get /v1/balance 200": {
    held_cents: 2500,
    open_cards: 1,
    pending_approvals: 0,
    max_per_card_cents: 50000,
    approval_required: true,
    setup_complete: true,
    uncollected_cents: 0,
  },
  "get /v1/api_keys/current 200": { id: KEY_ID, account_id: ACCOUNT_ID, mode: "test", role: "agent" },
  "get /v1/policies/default 200": { approval_required: true, max_amount_cents: 50000 },
  "put /v1/policies/default 200": { approval_required: true, max_amount_cents: 50000 },
  "post /v1/policies/check 200": {
    decision: "approval_required",
    reasons: [{ code: "approval_required", message: "The default policy requires a human's approval for new cards.", details: { source: "policy" } }],
    effective_policy: { approval_required: true, max_amount_cents: 50000 },
  },
  "get /v1/approvals 200": { data: [approval], has_more: false },
  "get /v1/approvals/{id} 200": approval,
  "post /v1/approvals/{id}/approve 201": cardCreated,
  "post /v1/approvals/{id}/reject 200": { ok: true, status: "REJECTED" },
  "get /v1/authorizations 200": { data: [authorization], has_more: false },
  "get /v1/transactions 200": { data: [transaction], has_more: false },
  "post /v1/test_helpers/cards/{id}/purchase 200": { approved: true, decline_reason: null, amount_cents: 1999, card: usedCard },
  "post /v1/test_helpers/cards/{id}/authorizations 200": authorization,
  "post /v1/test_helpers/authorizations/{id}/capture 201": transaction,
  "post /v1/test_helpers/authorizations/{id}/reverse 200": { ...authorization, status: "reversed" },
  "post /v1/test_helpers/authorizations/{id}/expire 200": { ...authorization, status: "expired" },
  "post /v1/test_helpers/transactions/{id}/refund 201": {
    ...transaction,
    id: "txn_1HdV7kPq4WzM9sBn2LtC6rXf",
    type: "refund",
    amount_cents: 500,
    created_at: "2026-11-05T10:00:00.000Z",
  },
  "post /v1/test_helpers/cards/{id}/expire_hold 200": { ...cardListItem, status: "CLOSED", remaining_cents: 0 },
  "post /admin/v1/accounts 201": { ...account, name: "Acme", kyb_verified: false, payment_method: null, cardholder: null },
  "get /admin/v1/accounts/{id} 200": account,
  "post /admin/v1/accounts/{id}/kyb 200": { ...account, payment_method: null, cardholder: null },
  "post /admin/v1/accounts/{id}/payment_method 200": { ...account, cardholder: null },
  "post /admin/v1/accounts/{id}/cardholder 200": account,
  "post /admin/v1/accounts/{id}/owners 201": {
    id: "own_0VcKVj7fWZCyKvQF5O3mo2zJ",
    account_id: ACCOUNT_ID,
    email: "owner@acme.example",
    invite_url: "https://cards.example.com/invite#inv_4fTq9ZkW2pLm8RxV6nBc3HdJ7sYa1GeU5oKi0MtN",
    invite_expires_at: "2026-11-24T09:30:00.000Z",
  },
  "post /admin/v1/accounts/{id}/keys 201": {
    id: KEY_ID,
    secret: "sk_test_4eC39HqLyjWDarjtT1zdp7dcQm4x",
    mode: "test",
    role: "agent",
    name: "shopping-agent",
    created_at: T0,
  },
  "get /admin/v1/accounts/{id}/keys 200": { data: [apiKey] },
  "post /admin/v1/keys/{id}/revoke 200": { ok: true, revoked_at: "2026-11-06T08:30:00.000Z" },
  "get /admin/v1/payments 200": {
    data: [
      {
        id: "pay_9XcL2vRm5TqB8nKd1WsH4zPf",
        account_id: ACCOUNT_ID,
        mode: "live",
        card_id: CARD_ID,
        transaction_id: TXN_ID,
        kind: "charge",
        amount_cents: 350,
        status: "uncollected",
        waived_cents: 0,
        attempts: 3,
        last_error: "card_declined: Your card was declined.",
        created_at: "2026-11-03T14:12:31.000Z",
        updated_at: "2026-11-03T20:12:31.000Z",
      },
    ],
  },
  "get /admin/v1/cards/attention 200": { data: [attentionCard] },
  "get /v1/events 200": { data: [cardCreatedEvent], has_more: false },
  "get /v1/events/{id} 200": cardCreatedEvent,
  "post /v1/webhook_endpoints 201": { ...webhookEndpoint, secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" },
  "get /v1/webhook_endpoints 200": { data: [webhookEndpoint], has_more: false },
  "get /v1/webhook_endpoints/{id} 200": webhookEndpoint,
  "post /v1/webhook_endpoints/{id} 200": { ...webhookEndpoint, status: "disabled", updated_at: T1 },
  "post /v1/webhook_endpoints/{id}/rotate_secret 200": {
    ...webhookEndpoint,
    secret: "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD",
    previous_secret_expires_at: "2026-11-25T09:30:00.000Z",
    updated_at: T1,
  },
  "delete /v1/webhook_endpoints/{id} 200": { id: ENDPOINT_ID, deleted: true },
  "get /v1/webhook_endpoints/{id}/deliveries 200": { data: [webhookDelivery], has_more: false },
  "post /v1/webhook_endpoints/{id}/deliveries/{delivery_id}/retry 200": { ...webhookDelivery, next_attempt_at: T1 },
  "post /admin/v1/cards/{id}/retry_recovery 200": attentionCard,
};

/** Example of each request body, by "method path". */
export const REQUEST_EXAMPLES: Record<string, unknown> = {
  "post /v1/cards": { amount_cents: 2500, agent_id: "shopping-agent", purpose: "Domain renewal" },
  "put /v1/policies/default": { approval_required: true, max_amount_cents: 50000 },
  "post /v1/policies/check": { amount_cents: 2500, agent_id: "shopping-agent" },
  "post /v1/approvals/{id}/reject": { reason: "Not in this month's budget" },
  "post /v1/test_helpers/cards/{id}/purchase": { amount_cents: 1999, merchant: "Registrar Inc." },
  "post /v1/test_helpers/cards/{id}/authorizations": {
    amount_cents: 1999,
    merchant: { name: "Registrar Inc.", category: "computer_network_services", country: "US" },
  },
  "post /v1/test_helpers/authorizations/{id}/capture": { amount_cents: 1999 },
  "post /v1/test_helpers/transactions/{id}/refund": { amount_cents: 500 },
  "post /v1/webhook_endpoints": { url: "https://example.com/cardctl/webhooks", events: ["approval.created", "card.used"], description: "Approvals inbox" },
  "post /v1/webhook_endpoints/{id}": { status: "disabled" },
  "post /v1/webhook_endpoints/{id}/rotate_secret": { expire_previous_in_seconds: 86400 },
  "post /admin/v1/accounts": { name: "Acme" },
  "post /admin/v1/accounts/{id}/kyb": { verified: true },
  "post /admin/v1/accounts/{id}/payment_method": { payment_method: "pm_card_visa" },
  "post /admin/v1/accounts/{id}/cardholder": {
    type: "company",
    name: "Acme Robotics",
    email: "ops@acme.example",
    billing: { line1: "1 Main Street", city: "Springfield", state: "IL", postal_code: "62701", country: "US" },
    tax_id: "12-3456789",
  },
  "post /admin/v1/accounts/{id}/keys": { mode: "test", role: "agent", name: "shopping-agent" },
  "post /admin/v1/accounts/{id}/owners": { email: "owner@acme.example" },
};

/** Example error envelopes, by error code. */
export function errorExample(code: string, message: string, details?: Record<string, unknown>) {
  return { error: { code, message, ...(details ? { details } : {}), request_id: "req_4NwZ8cTq1LmV6bRk3HsD9pYx" } };
}

/** Examples of path parameters, by prefix of the identifier they take. */
export const ID_EXAMPLES: Record<string, string> = {
  card_: CARD_ID,
  appr_: APPROVAL_ID,
  auth_: AUTH_ID,
  txn_: TXN_ID,
  acct_: ACCOUNT_ID,
  key_: KEY_ID,
  evt_: EVENT_ID,
  we_: ENDPOINT_ID,
};
