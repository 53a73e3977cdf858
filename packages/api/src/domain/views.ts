import type { Approval, Card } from "../db/entities.js";
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
});

export const cardDetailView = (c: Card, ephemeralKeySecret: string) => ({
  ...cardListView(c),
  closed_at: c.closed_at === null ? null : isoTime(c.closed_at),
  processor_card_id: c.processor_card_id ?? "",
  ephemeral_key_secret: ephemeralKeySecret,
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
