import type { DataSource } from "typeorm";
import type { Mode, Role } from "../db/entities.js";
import type { ProcessorResolver } from "../processor/types.js";

export interface DomainConfig {
  /** Base of setup_url and other links. */
  publicUrl: string;
  approvalTtlMs: number;
  /** Longest a single processor call may take before it counts as failed. */
  processorTimeoutMs: number;
  /** Lifetime of a card from issue (CARD_TTL_SECONDS), inside the shortest hold validity. */
  cardTtlMs: number;
  /** How long a card in CREATING belongs to the request minting it before recovery may take over. */
  creationLeaseMs: number;
  webhooks: WebhookConfig;
}

/** Outgoing webhooks (DESIGN 3.7). */
export interface WebhookConfig {
  /** WEBHOOK_ALLOW_PRIVATE: endpoints may be http:// and resolve to loopback or private addresses. */
  allowPrivate: boolean;
  /** Longest an attempt may take for a whole answer (10 s). */
  timeoutMs: number;
  /** First retry delay, doubling with each failure (with jitter), capped at 6 hours or the window. */
  retryBaseMs: number;
  /** Automatic retries stop this long after the event (3 days); then the endpoint is disabled. */
  retryWindowMs: number;
}

export interface Deps {
  ds: DataSource;
  processors: ProcessorResolver;
  config: DomainConfig;
  /** Test hook: runs between the hold and the mint of every card (crash tests pause here). */
  afterHold?: (cardId: string) => Promise<void>;
  /** Test hook: runs before every card's hold is placed (an attempt stalled there outlives its lease). */
  beforeHold?: (cardId: string) => Promise<void>;
}

/** The API key a request authenticated with, or a signed-in owner (the dashboard). */
export interface Principal {
  /** The key (key_…); for an owner's session, the owner (own_…), so per-key scoping (idempotency, rate limits) is per owner. */
  keyId: string;
  accountId: string;
  mode: Mode;
  role: Role;
  /** Set when an owner's dashboard session made the request: the actor of its events. */
  ownerId?: string;
  /** With ownerId: the session (owner_ses…) the request came with. */
  sessionId?: string;
}
