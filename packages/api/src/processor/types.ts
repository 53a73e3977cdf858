import type { Mode } from "../db/entities.js";

/** Who the processor acts for: the account, its mode, and its saved payment method. */
export interface ProcessorAccount {
  accountId: string;
  mode: Mode;
  paymentMethod: string;
}

export interface MintedCard {
  processorCardId: string;
  lastFour: string;
  /** MM/YY (formatExpiration) */
  expiration: string;
}

/** A card's expiry as MintedCard has it: MM/YY. */
export const formatExpiration = (month: number, year: number) => `${String(month).padStart(2, "0")}/${String(year % 100).padStart(2, "0")}`;

/**
 * A card processor: holds on the saved payment method and virtual cards. Every mutating call takes
 * an idempotency key derived from our own ids, so retrying any step never makes a second object.
 */
export interface Processor {
  readonly name: string;
  placeHold(account: ProcessorAccount, amountCents: number, idempotencyKey: string): Promise<{ holdId: string }>;
  cancelHold(account: ProcessorAccount, holdId: string, idempotencyKey: string): Promise<void>;
  captureHold(account: ProcessorAccount, holdId: string, amountCents: number, idempotencyKey: string): Promise<void>;
  mintCard(
    account: ProcessorAccount,
    card: { cardId: string; amountCents: number; agentId: string | null },
    idempotencyKey: string,
  ): Promise<MintedCard>;
  /** Deactivates the card for good; idempotent. */
  revokeCard(account: ProcessorAccount, processorCardId: string, idempotencyKey: string): Promise<void>;
  createEphemeralKey(
    account: ProcessorAccount,
    processorCardId: string,
    nonce?: string,
  ): Promise<{ secret: string; expiresAt: number }>;
  /**
   * Optional set-up when the operator saves a payment method (Stripe: the account's Customer in
   * this mode, with the payment method attached). Idempotent; processors without set-up omit it.
   */
  prepareAccount?(account: ProcessorAccount): Promise<void>;
}

/** The processor failed or timed out; nothing the caller can fix. */
export class ProcessorError extends Error {
  constructor(
    message: string,
    readonly step: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = "ProcessorError";
  }
}

/** The saved payment method was declined for the hold. */
export class PaymentDeclinedError extends Error {
  constructor(readonly declineCode: string) {
    super(`The saved payment method was declined (${declineCode}).`);
    this.name = "PaymentDeclinedError";
  }
}

/** Picks the processor for a mode; throws AppError 503 when the mode has none configured. */
export type ProcessorResolver = (mode: Mode) => Processor;
