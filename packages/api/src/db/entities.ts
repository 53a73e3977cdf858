import { EntitySchema, type ValueTransformer } from "typeorm";

export type Mode = "test" | "live";
export type Role = "full" | "agent";
/** CREATING and FAILED are internal: a card being minted, or one whose minting was compensated. */
export type CardStatus = "CREATING" | "OPEN" | "USED" | "CLOSED" | "FAILED";
/** PENDING: a hold may exist under the card's idempotency key (the call was made, its answer not recorded). */
export type HoldStatus = "NONE" | "PENDING" | "OPEN" | "CAPTURED" | "RELEASED";
export type ApprovalStatus = "PENDING" | "APPROVED" | "REJECTED" | "EXPIRED";

export interface Account {
  id: string;
  name: string;
  kyb_verified: boolean;
  payment_method: string | null;
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
    expires_at: ms(),
    created_at: ms(),
    decided_at: ms(true),
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

export const entities = [AccountEntity, ApiKeyEntity, PolicyEntity, CardEntity, ApprovalEntity, IdempotencyEntity];
