import { EntitySchema, type ValueTransformer } from "typeorm";

export type Mode = "test" | "live";
export type Role = "full" | "agent";
/** CREATING and FAILED are internal: a card being minted, or one whose minting was compensated. */
export type CardStatus = "CREATING" | "OPEN" | "USED" | "CLOSED" | "FAILED";
/** PENDING: a hold may exist under the card's idempotency key (the call was made, its answer not recorded). */
/** EXPIRED: the processor canceled the hold (it lapsed) before we captured or released it. */
export type HoldStatus = "NONE" | "PENDING" | "OPEN" | "CAPTURED" | "RELEASED" | "EXPIRED";
export type ApprovalStatus = "PENDING" | "APPROVED" | "REJECTED" | "EXPIRED";

export interface Account {
  id: string;
  name: string;
  kyb_verified: boolean;
  payment_method: string | null;
  /** JSON of CardholderDetails (domain/accounts.ts), set by the operator; null until then. */
  cardholder: string | null;
  created_at: number;
}

export interface ApiKey {
  id: string;
  account_id: string;
  mode: Mode;
  role: Role;
  name: string | null;
  secret_hash: string;
  prefix: string;
  last4: string;
  created_at: number;
  revoked_at: number | null;
}

export interface Policy {
  account_id: string;
  mode: Mode;
  approval_required: boolean;
  max_amount_cents: number;
  updated_at: number;
}

export interface Card {
  seq: number;
  id: string;
  account_id: string;
  mode: Mode;
  status: CardStatus;
  amount_cents: number;
  remaining_cents: number;
  spent_cents: number;
  /** Bumped with spent_cents by every settlement and refund: their optimistic lock on the card's money. */
  ledger_version: number;
  agent_id: string | null;
  purpose: string | null;
  last_four: string | null;
  expiration: string | null;
  processor_card_id: string | null;
  hold_id: string | null;
  hold_status: HoldStatus;
  approval_id: string | null;
  /** `<api key id>:<Idempotency-Key>` of the request that created it; unique, so a retry finds it. */
  creation_key: string | null;
  lease_until: number | null;
  revoked_at: number | null;
  created_at: number;
  closed_at: number | null;
  used_at: number | null;
  /** The request (idempotency scope) whose purchase made it USED, if it had a key. */
  used_key: string | null;
  /** Issue time + CARD_TTL_SECONDS: the card closes before its hold can lapse. */
  expires_at: number;
  /** Failed attempts of the recovery pass at the card's processor follow-up (revoke, hold release). */
  recovery_attempts: number;
  /** When the recovery pass may try again (exponential backoff); null: due now. */
  recovery_next_at: number | null;
  recovery_error: string | null;
  /** Set after MAX_ATTEMPTS failures: the recovery pass leaves the card to an operator. */
  needs_attention: boolean;
}

export interface Approval {
  seq: number;
  id: string;
  account_id: string;
  mode: Mode;
  amount_cents: number;
  agent_id: string | null;
  purpose: string | null;
  /** The per-request override's maximum, re-applied against the current default on approve. */
  override_max_cents: number | null;
  status: ApprovalStatus;
  reason: string | null;
  card_id: string | null;
  creation_key: string | null;
  /** The request (idempotency scope) that approved or rejected it, if it had a key. */
  decision_key: string | null;
  expires_at: number;
  created_at: number;
  decided_at: number | null;
}

/** Millisecond timestamps live in BIGINT columns; mysql2 may hand them back as strings. */
const msTransformer: ValueTransformer = {
  to: (v: number | null | undefined) => v,
  from: (v: string | number | null) => (v === null || v === undefined ? v : Number(v)),
};

const ms = (nullable = false) => ({ type: "bigint" as const, nullable, transformer: msTransformer });
const str = (length: number, nullable = false) => ({ type: "varchar" as const, length, nullable });
const int = (nullable = false) => ({ type: "integer" as const, nullable });
const bool = () => ({ type: "boolean" as const });

export const AccountEntity = new EntitySchema<Account>({
  name: "Account",
  tableName: "accounts",
  columns: {
    id: { ...str(40), primary: true },
    name: str(200),
    kyb_verified: bool(),
    payment_method: str(255, true),
    cardholder: { type: "text" as const, nullable: true },
    created_at: ms(),
  },
});

export const ApiKeyEntity = new EntitySchema<ApiKey>({
  name: "ApiKey",
  tableName: "api_keys",
  columns: {
    id: { ...str(40), primary: true },
    account_id: str(40),
    mode: str(8),
    role: str(8),
    name: str(200, true),
    secret_hash: str(64),
    prefix: str(16),
    last4: str(4),
    created_at: ms(),
    revoked_at: ms(true),
  },
});

export const PolicyEntity = new EntitySchema<Policy>({
  name: "Policy",
  tableName: "policies",
  columns: {
    account_id: { ...str(40), primary: true },
    mode: { ...str(8), primary: true },
    approval_required: bool(),
    max_amount_cents: int(),
    updated_at: ms(),
  },
});

export const CardEntity = new EntitySchema<Card>({
  name: "Card",
  tableName: "cards",
  columns: {
    seq: { type: "integer", primary: true, generated: "increment" },
    id: str(40),
    account_id: str(40),
    mode: str(8),
    status: str(16),
    amount_cents: int(),
    remaining_cents: int(),
    spent_cents: int(),
    ledger_version: int(),
    agent_id: str(255, true),
    purpose: str(500, true),
    last_four: str(4, true),
    expiration: str(5, true),
    processor_card_id: str(255, true),
    hold_id: str(255, true),
    hold_status: str(16),
    approval_id: str(40, true),
    creation_key: str(255, true),
    lease_until: ms(true),
    revoked_at: ms(true),
    created_at: ms(),
    closed_at: ms(true),
    used_at: ms(true),
    used_key: str(255, true),
    expires_at: ms(),
    recovery_attempts: int(),
    recovery_next_at: ms(true),
    recovery_error: str(500, true),
    needs_attention: bool(),
  },
});

export const ApprovalEntity = new EntitySchema<Approval>({
  name: "Approval",
  tableName: "approvals",
  columns: {
    seq: { type: "integer", primary: true, generated: "increment" },
    id: str(40),
    account_id: str(40),
    mode: str(8),
    amount_cents: int(),
    agent_id: str(255, true),
    purpose: str(500, true),
    override_max_cents: int(true),
    status: str(16),
    reason: str(500, true),
    card_id: str(40, true),
    creation_key: str(255, true),
    decision_key: str(255, true),
    expires_at: ms(),
    created_at: ms(),
    decided_at: ms(true),
  },
});

export type AuthorizationStatus = "pending" | "closed" | "reversed" | "expired";

/** A merchant's request to charge a card (DESIGN 3.6), approved or declined in real time. */
export interface Authorization {
  seq: number;
  id: string;
  account_id: string;
  mode: Mode;
  card_id: string;
  processor_authorization_id: string | null;
  amount_cents: number;
  approved: boolean;
  decline_reason: string | null;
  status: AuthorizationStatus;
  merchant_name: string | null;
  merchant_category: string | null;
  merchant_country: string | null;
  /** This authorization made its card USED; if it never settles the card is given back. */
  consumed_card: boolean;
  created_at: number;
  updated_at: number;
}

export type TransactionType = "capture" | "refund";

/** Money that settled on a card (capture) or came back from the merchant (refund). */
export interface Transaction {
  seq: number;
  id: string;
  account_id: string;
  mode: Mode;
  card_id: string;
  authorization_id: string | null;
  processor_transaction_id: string | null;
  type: TransactionType;
  amount_cents: number;
  merchant_name: string | null;
  /** A refund the test helpers made of a capture: that capture's id (refunds of it never exceed it). */
  refund_of: string | null;
  created_at: number;
}

export type PaymentKind = "hold_capture" | "charge" | "refund";
/** `waived`: a refund drawn on an uncollected charge, which forgives that much of it instead of moving money. */
export type PaymentStatus = "pending" | "succeeded" | "uncollected" | "attention" | "waived";

/** Money moving from (or back to) the account's payment method because of a transaction. */
export interface Payment {
  seq: number;
  id: string;
  account_id: string;
  mode: Mode;
  card_id: string;
  transaction_id: string;
  kind: PaymentKind;
  amount_cents: number;
  status: PaymentStatus;
  refund_of: string | null;
  processor_payment_id: string | null;
  attempts: number;
  next_attempt_at: number | null;
  last_error: string | null;
  lease_until: number | null;
  created_at: number;
  updated_at: number;
}

export const AuthorizationEntity = new EntitySchema<Authorization>({
  name: "Authorization",
  tableName: "authorizations",
  columns: {
    seq: { type: "integer", primary: true, generated: "increment" },
    id: str(40),
    account_id: str(40),
    mode: str(8),
    card_id: str(40),
    processor_authorization_id: str(255, true),
    amount_cents: int(),
    approved: bool(),
    decline_reason: str(64, true),
    status: str(16),
    merchant_name: str(200, true),
    merchant_category: str(100, true),
    merchant_country: str(2, true),
    consumed_card: bool(),
    created_at: ms(),
    updated_at: ms(),
  },
});

export const TransactionEntity = new EntitySchema<Transaction>({
  name: "Transaction",
  tableName: "transactions",
  columns: {
    seq: { type: "integer", primary: true, generated: "increment" },
    id: str(40),
    account_id: str(40),
    mode: str(8),
    card_id: str(40),
    authorization_id: str(40, true),
    processor_transaction_id: str(255, true),
    type: str(16),
    amount_cents: int(),
    merchant_name: str(200, true),
    refund_of: str(40, true),
    created_at: ms(),
  },
});

export const PaymentEntity = new EntitySchema<Payment>({
  name: "Payment",
  tableName: "payments",
  columns: {
    seq: { type: "integer", primary: true, generated: "increment" },
    id: str(40),
    account_id: str(40),
    mode: str(8),
    card_id: str(40),
    transaction_id: str(40),
    kind: str(16),
    amount_cents: int(),
    status: str(16),
    refund_of: str(40, true),
    processor_payment_id: str(255, true),
    attempts: int(),
    next_attempt_at: ms(true),
    last_error: str(500, true),
    lease_until: ms(true),
    created_at: ms(),
    updated_at: ms(),
  },
});

export interface IdempotencyRecord {
  api_key_id: string;
  idem_key: string;
  request_hash: string;
  status: "RUNNING" | "DONE";
  response_status: number | null;
  response_body: string | null;
  /** A RUNNING record whose lock ran out belongs to a request that died; a retry may take over. */
  locked_until: number;
  created_at: number;
  expires_at: number;
}

export const IdempotencyEntity = new EntitySchema<IdempotencyRecord>({
  name: "IdempotencyRecord",
  tableName: "idempotency_keys",
  columns: {
    api_key_id: { ...str(40), primary: true },
    idem_key: { ...str(200), primary: true },
    request_hash: str(64),
    status: str(16),
    response_status: int(true),
    response_body: { type: "text", nullable: true },
    locked_until: ms(),
    created_at: ms(),
    expires_at: ms(),
  },
});

/** Who caused an event: an API key, an owner (dashboard), the card processor, or the service itself. */
export type ActorType = "api_key" | "owner" | "processor" | "system";

/** The outbox (DESIGN 3.7): one row per state change, written in the change's own transaction. */
export interface EventRecord {
  /** Insertion order: the newest-first order of lists, and the cursor of live streams. */
  seq: number;
  id: string;
  account_id: string;
  mode: Mode;
  type: string;
  actor_type: ActorType;
  actor_id: string | null;
  /** JSON of the resource as the API shows it (the event's data.object). */
  data: string;
  created_at: number;
}

export const EventEntity = new EntitySchema<EventRecord>({
  name: "EventRecord",
  tableName: "events",
  columns: {
    seq: { type: "integer", primary: true, generated: "increment" },
    id: str(40),
    account_id: str(40),
    mode: str(8),
    type: str(64),
    actor_type: str(16),
    actor_id: str(40, true),
    data: { type: "text" },
    created_at: ms(),
  },
});

export type WebhookEndpointStatus = "enabled" | "disabled";

/** Where an account's events of one mode are POSTed, signed with its secret (DESIGN 3.7). */
export interface WebhookEndpoint {
  seq: number;
  id: string;
  account_id: string;
  mode: Mode;
  url: string;
  /** JSON array of event types, or ["*"]. */
  events: string;
  description: string | null;
  /** whsec_…, kept to sign deliveries; shown once, at creation or rotation. */
  secret: string;
  /** The secret before the last rotation: deliveries are signed with it too until previous_secret_expires_at. */
  previous_secret: string | null;
  previous_secret_expires_at: number | null;
  status: WebhookEndpointStatus;
  created_at: number;
  updated_at: number;
}

export type WebhookDeliveryStatus = "pending" | "succeeded" | "failed";

/** One event's delivery to one endpoint: written with the event, worked off under leases. */
export interface WebhookDelivery {
  seq: number;
  id: string;
  endpoint_id: string;
  account_id: string;
  mode: Mode;
  event_id: string;
  event_type: string;
  status: WebhookDeliveryStatus;
  attempts: number;
  /** Due time; while an attempt runs, the end of its lease; null once final. */
  next_attempt_at: number | null;
  /** Set by a manual retry (no automatic retries after it); null: the automatic schedule. */
  retry_until: number | null;
  lease_token: string | null;
  last_response_status: number | null;
  last_error: string | null;
  created_at: number;
  updated_at: number;
}

export const WebhookEndpointEntity = new EntitySchema<WebhookEndpoint>({
  name: "WebhookEndpoint",
  tableName: "webhook_endpoints",
  columns: {
    seq: { type: "integer", primary: true, generated: "increment" },
    id: str(40),
    account_id: str(40),
    mode: str(8),
    url: str(2048),
    events: { type: "text" },
    description: str(500, true),
    secret: str(100),
    previous_secret: str(100, true),
    previous_secret_expires_at: ms(true),
    status: str(16),
    created_at: ms(),
    updated_at: ms(),
  },
});

export const WebhookDeliveryEntity = new EntitySchema<WebhookDelivery>({
  name: "WebhookDelivery",
  tableName: "webhook_deliveries",
  columns: {
    seq: { type: "integer", primary: true, generated: "increment" },
    id: str(40),
    endpoint_id: str(40),
    account_id: str(40),
    mode: str(8),
    event_id: str(40),
    event_type: str(64),
    status: str(16),
    attempts: int(),
    next_attempt_at: ms(true),
    retry_until: ms(true),
    lease_token: str(40, true),
    last_response_status: int(true),
    last_error: str(500, true),
    created_at: ms(),
    updated_at: ms(),
  },
});

/** A human who signs in to the dashboard for one account (DESIGN 3.9). */
export interface Owner {
  id: string;
  account_id: string;
  /** Lower-cased; one owner per email across the service. */
  email: string;
  /** scrypt (passwords.ts); null until the owner accepts an invite. */
  password_hash: string | null;
  created_at: number;
}

/** Failed sign-ins in a row for an email (owner or not), and until when its sign-in is refused. */
export interface SignInFailure {
  /** SHA-256 of the lower-cased email: unknown emails are counted without being stored. */
  email_hash: string;
  failures: number;
  blocked_until: number | null;
  updated_at: number;
}

/** A one-time link that lets the invited email set a password (valid 24 h). */
export interface OwnerInvite {
  id: string;
  account_id: string;
  email: string;
  token_hash: string;
  created_at: number;
  expires_at: number;
  used_at: number | null;
}

/** A signed-in owner's session behind the HttpOnly cookie; its CSRF token guards state changes. */
export interface OwnerSession {
  id: string;
  owner_id: string;
  account_id: string;
  token_hash: string;
  csrf_token: string;
  created_at: number;
  /** Idle expiry: pushed forward while the session is used. */
  expires_at: number;
  revoked_at: number | null;
}

export const OwnerEntity = new EntitySchema<Owner>({
  name: "Owner",
  tableName: "owners",
  columns: {
    id: { ...str(40), primary: true },
    account_id: str(40),
    email: str(254),
    password_hash: str(200, true),
    created_at: ms(),
  },
});

export const SignInFailureEntity = new EntitySchema<SignInFailure>({
  name: "SignInFailure",
  tableName: "sign_in_failures",
  columns: {
    email_hash: { ...str(64), primary: true },
    failures: int(),
    blocked_until: ms(true),
    updated_at: ms(),
  },
});

export const OwnerInviteEntity = new EntitySchema<OwnerInvite>({
  name: "OwnerInvite",
  tableName: "owner_invites",
  columns: {
    id: { ...str(40), primary: true },
    account_id: str(40),
    email: str(254),
    token_hash: str(64),
    created_at: ms(),
    expires_at: ms(),
    used_at: ms(true),
  },
});

export const OwnerSessionEntity = new EntitySchema<OwnerSession>({
  name: "OwnerSession",
  tableName: "owner_sessions",
  columns: {
    id: { ...str(40), primary: true },
    owner_id: str(40),
    account_id: str(40),
    token_hash: str(64),
    csrf_token: str(64),
    created_at: ms(),
    expires_at: ms(),
    revoked_at: ms(true),
  },
});

export const entities = [AccountEntity, ApiKeyEntity, PolicyEntity, CardEntity, ApprovalEntity, IdempotencyEntity, AuthorizationEntity, TransactionEntity, PaymentEntity, EventEntity, WebhookEndpointEntity, WebhookDeliveryEntity, OwnerEntity, OwnerInviteEntity, OwnerSessionEntity, SignInFailureEntity];
