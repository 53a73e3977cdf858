import type { Approval, Authorization, Card, Payment, Transaction } from "../db/entities.js";
import type { RevealEndpoint } from "../processor/types.js";
import { isoTime } from "./ids.js";

/** The public status of a card; internal states never reach a response. */
export type PublicCardStatus = "OPEN" | "USED" | "CLOSED";

export const cardCreatedView = (c: Card) => ({
  id: c.id,
  status: c.status as PublicCardStatus,
  last_four: c.last_four ?? "",
  expiration: c.expiration ?? "",
  spending_limit_cents: c.amount_cents,
  remaining_cents: c.remaining_cents,
  agent_id: c.agent_id,
  created_at: isoTime(c.created_at),
  expires_at: isoTime(c.expires_at),
  spent_cents: c.spent_cents,
});

export const cardListView = (c: Card) => ({
  id: c.id,
  status: c.status as PublicCardStatus,
  last_four: c.last_four ?? "",
  expiration: c.expiration ?? "",
  amount_cents: c.amount_cents,
  remaining_cents: c.remaining_cents,
  agent_id: c.agent_id,
  purpose: c.purpose,
  created_at: isoTime(c.created_at),
  expires_at: isoTime(c.expires_at),
  spent_cents: c.spent_cents,
});

export const cardDetailView = (c: Card, ephemeralKeySecret: string, revealEndpoint: RevealEndpoint) => ({
  ...cardListView(c),
  closed_at: c.closed_at === null ? null : isoTime(c.closed_at),
  processor_card_id: c.processor_card_id ?? "",
  ephemeral_key_secret: ephemeralKeySecret,
  reveal: { url: revealEndpoint.url, api_version: revealEndpoint.apiVersion },
});

/**
 * A card's hold as its events show it (hold.captured, hold.released): the amount held on the
 * payment method for the card, and how much of it was captured and how much released.
 */
export const holdView = (c: Card, capturedCents: number) => ({
  card_id: c.id,
  amount_cents: c.amount_cents,
  captured_cents: capturedCents,
  released_cents: c.amount_cents - capturedCents,
  status: capturedCents > 0 ? ("captured" as const) : ("released" as const),
});

export const approvalView = (a: Approval) => ({
  id: a.id,
  amount_cents: a.amount_cents,
  agent_id: a.agent_id,
  purpose: a.purpose,
  status: a.status,
  reason: a.reason,
  card_id: a.card_id,
  expires_at: isoTime(a.expires_at),
  created_at: isoTime(a.created_at),
});

export const authorizationView = (a: Authorization) => ({
  id: a.id,
  card_id: a.card_id,
  amount_cents: a.amount_cents,
  approved: a.approved,
  decline_reason: a.decline_reason,
  status: a.status,
  merchant: { name: a.merchant_name, category: a.merchant_category, country: a.merchant_country },
  created_at: isoTime(a.created_at),
});

export const transactionView = (t: Transaction) => ({
  id: t.id,
  card_id: t.card_id,
  authorization_id: t.authorization_id,
  type: t.type,
  amount_cents: t.amount_cents,
  merchant_name: t.merchant_name,
  created_at: isoTime(t.created_at),
});

/** A payment as the operator API lists it (only problem statuses are listed). */
export const operatorPaymentView = (p: Payment, waivedCents = 0) => ({
  id: p.id,
  account_id: p.account_id,
  mode: p.mode,
  card_id: p.card_id,
  transaction_id: p.transaction_id,
  kind: p.kind,
  amount_cents: p.amount_cents,
  status: p.status as "uncollected" | "attention",
  waived_cents: waivedCents,
  attempts: p.attempts,
  last_error: p.last_error,
  created_at: isoTime(p.created_at),
  updated_at: isoTime(p.updated_at),
});

/** A card whose processor follow-up needs an operator (the operator API). */
export const attentionCardView = (c: Card) => ({
  id: c.id,
  account_id: c.account_id,
  mode: c.mode,
  status: c.status as "CREATING" | "USED" | "CLOSED" | "FAILED",
  hold_status: c.hold_status,
  recovery_attempts: c.recovery_attempts,
  recovery_error: c.recovery_error,
  created_at: isoTime(c.created_at),
  closed_at: c.closed_at === null ? null : isoTime(c.closed_at),
});
