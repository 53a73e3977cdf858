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

/** See Processor.revealEndpoint. */
export interface RevealEndpoint {
  url: string;
  apiVersion: string | null;
}

/**
 * What a capture or charge left beyond the money moved: `excessRefundFailure` when the processor
 * took more than asked (its minimum charge) and its refund of the difference failed at once.
 */
export interface Collected {
  excessRefundFailure?: string;
}

/** The idempotency key of the refund of what a processor's minimum charge took beyond the amount of the payment made under `key`. */
export const excessRefundKey = (key: string) => `${key}:refund`;

/** A card's expiry as MintedCard has it: MM/YY. */
export const formatExpiration = (month: number, year: number) => `${String(month).padStart(2, "0")}/${String(year % 100).padStart(2, "0")}`;

/**
 * A card processor: holds on the saved payment method and virtual cards. Every mutating call takes
 * an idempotency key derived from our own ids, so retrying any step never makes a second object.
 */
/** What finds the processor's objects made for our card: its id (in their metadata) and creation time (ms). */
export interface CardRefs {
  cardId: string;
  createdAt: number;
}

/**
 * Every call's optional last argument `signal` is the domain's deadline (callProcessor): once it
 * aborts, an adapter sends no new request for the call (no retry, no next step).
 */
export interface Processor {
  readonly name: string;
  /** `refs` label the hold at the processor (metadata), so it can be found from our ids. */
  placeHold(account: ProcessorAccount, amountCents: number, refs: CardRefs, idempotencyKey: string, signal?: AbortSignal): Promise<{ holdId: string }>;
  /**
   * Every hold made for our card, whatever key made it, newest first, by reading the processor
   * (never by sending a create again): an unknown outcome is resolved this way. Every one, since an
   * attempt that outlived its lease may have made one beside the one the card keeps.
   * `createdAt` is our card's creation time (ms): the holds were made after it.
   */
  findHolds(account: ProcessorAccount, refs: CardRefs, signal?: AbortSignal): Promise<Array<{ holdId: string; status: "held" | "captured" | "canceled" }>>;
  cancelHold(account: ProcessorAccount, holdId: string, idempotencyKey: string, signal?: AbortSignal): Promise<void>;
  /**
   * Captures `amountCents` of the hold and releases the rest; a hold captures once. Throws
   * HoldUnavailableError when the processor has canceled the hold (it lapsed) before.
   */
  captureHold(account: ProcessorAccount, holdId: string, amountCents: number, idempotencyKey: string, signal?: AbortSignal): Promise<Collected>;
  /** Every processor card minted for our card, whatever key made it, newest first, by reading (as findHolds). */
  findCards(account: ProcessorAccount, refs: CardRefs, signal?: AbortSignal): Promise<MintedCard[]>;
  mintCard(
    account: ProcessorAccount,
    card: CardRefs & { amountCents: number; agentId: string | null },
    idempotencyKey: string,
    signal?: AbortSignal,
  ): Promise<MintedCard>;
  /**
   * Charges the saved payment method off-session, for money a card spent beyond its hold (an
   * overage, a second capture). Declines throw PaymentDeclinedError; `refs` label the payment.
   */
  chargeOffSession(
    account: ProcessorAccount,
    amountCents: number,
    refs: CardRefs & { paymentId: string },
    idempotencyKey: string,
    signal?: AbortSignal,
  ): Promise<Collected & { paymentId: string }>;
  /** Gives money back through a payment (a captured hold or a charge); at most what it collected. */
  refund(account: ProcessorAccount, paymentId: string, amountCents: number, idempotencyKey: string, signal?: AbortSignal): Promise<void>;
  /** Deactivates the card for good; idempotent. */
  revokeCard(account: ProcessorAccount, processorCardId: string, idempotencyKey: string, signal?: AbortSignal): Promise<void>;
  createEphemeralKey(
    account: ProcessorAccount,
    processorCardId: string,
    nonce?: string,
    signal?: AbortSignal,
  ): Promise<{ secret: string; expiresAt: number }>;
  /**
   * Where a client reads the card's number and CVC itself with an ephemeral key, as Stripe.js
   * (Issuing Elements) does: `GET url?expand[]=number&expand[]=cvc` with `Authorization: Bearer
   * <ephemeral key secret>` and, when set, `Stripe-Version: apiVersion`. An absolute URL (Stripe), or
   * a path on this service (the simulated processor). The number never passes through the API.
   */
  revealEndpoint(processorCardId: string): RevealEndpoint;
  /** Test mode: makes the hold lapse as it would after about 7 days (default: cancel it). */
  expireHold?(holdId: string): Promise<void>;
  /**
   * Optional set-up when the operator saves a payment method (Stripe: the account's Customer in
   * this mode, with the payment method attached). Idempotent; processors without set-up omit it.
   */
  prepareAccount?(account: ProcessorAccount, signal?: AbortSignal): Promise<void>;
  /**
   * Where the owner enters the payment method in the browser with the processor's own library
   * (Stripe.js and its Payment Element), so no card number reaches this service. Processors
   * without one (the simulated processor: a choice of test cards) omit it.
   */
  readonly browserSetup?: BrowserSetup;
}

/** The account (and mode) a browser set-up is for; it has no saved payment method yet, perhaps. */
export type SetupAccount = Pick<ProcessorAccount, "accountId" | "mode">;

/**
 * Collecting the payment method in the browser (Stripe: a SetupIntent for the account's Customer,
 * confirmed by Stripe.js), then reading back what was collected, server side.
 */
export interface BrowserSetup {
  /** The key the browser library is initialised with (Stripe's pk_…); undefined when not configured. */
  readonly publishableKey: string | undefined;
  /**
   * An intent for the browser to confirm: its id and the client secret Stripe.js needs. The same
   * open intent for the same `attempt` (idempotent); a new one once that intent is used up.
   */
  start(account: SetupAccount, attempt: string, signal?: AbortSignal): Promise<{ id: string; clientSecret: string }>;
  /**
   * The payment method an intent collected, once the processor says it succeeded; the processor
   * keeps it ready for this account (attached to its Customer). Throws SetupIntentError when the
   * intent is not this account's, or has not succeeded.
   */
  finish(account: SetupAccount, intentId: string, signal?: AbortSignal): Promise<{ paymentMethod: string }>;
}

/** The intent given to BrowserSetup.finish is unknown, another account's, or not succeeded (yet). */
export class SetupIntentError extends Error {
  constructor(
    message: string,
    readonly reason: "not_found" | "not_succeeded",
    readonly status?: string,
  ) {
    super(message);
    this.name = "SetupIntentError";
  }
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

/** The hold can no longer be captured: the processor canceled it (it expired) before the capture. */
export class HoldUnavailableError extends Error {
  constructor(readonly holdId: string) {
    super(`The hold ${holdId} was canceled by the processor and can no longer be captured.`);
    this.name = "HoldUnavailableError";
  }
}

/** The processor answered a refund with its definite failure: the money did not go back, and asking again under its key answers the same. */
export class RefundFailedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "RefundFailedError";
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

/**
 * The processor will not issue for the account until the operator completes its set-up (a Stripe
 * cardholder that is missing, disabled or short of requirements). Definite, and nothing was made
 * by the call; the API answers 403 setup_required with `missing` (toApiError).
 */
export class AccountSetupError extends Error {
  constructor(
    message: string,
    readonly missing: string[],
    /** The page where set-up is finished (`setup_url`), when the processor knows it. */
    readonly setupUrl?: string,
  ) {
    super(message);
    this.name = "AccountSetupError";
  }
}
