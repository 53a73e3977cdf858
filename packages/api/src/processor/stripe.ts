import Stripe from "stripe";
import type { DataSource } from "typeorm";
import { isUniqueViolation } from "../db/datasource.js";
import { queryRows } from "../db/fast.js";
import type { Mode } from "../db/entities.js";
import { randomToken } from "../domain/ids.js";
import { sha256 } from "../domain/secrets.js";
import { formatExpiration, PaymentDeclinedError, ProcessorError, type MintedCard, type Processor, type ProcessorAccount } from "./types.js";

/**
 * Issuing Elements (Stripe.js) reads card details with an ephemeral key made under this API
 * version; the SDK refuses to create an ephemeral key without an explicit version.
 */
export const EPHEMERAL_KEY_API_VERSION = "2020-03-02";

/**
 * Stripe's minimum charge in USD. It applies when a PaymentIntent is created and to what a capture
 * takes. Cards may be for 1..50000 cents: below this, the hold is placed for the minimum (the card's
 * spending limit stays the card's amount), and a purchase below it is captured at the minimum with
 * the difference refunded at once, so the net charge is exactly the purchase.
 */
export const STRIPE_MINIMUM_CHARGE_CENTS = 50;

export interface StripeProcessorOptions {
  mode: Mode;
  secretKey: string;
  /** e.g. `http://127.0.0.1:12111`: another host for the SDK (tests, stripe-mock); Stripe's own when unset. */
  apiBase?: string;
  /** Per-request timeout of the SDK; the domain's own deadline (callProcessor) applies on top. */
  timeoutMs: number;
  ds: DataSource;
  /** Who the Issuing cardholder of an account is; Stripe requires a name and a billing address. */
  cardholder?: { name: string; address: { line1: string; city: string; state?: string; postal_code: string; country: string } };
}

const DEFAULT_CARDHOLDER: NonNullable<StripeProcessorOptions["cardholder"]> = {
  name: "Cardctl Agent",
  address: { line1: "510 Townsend Street", city: "San Francisco", state: "CA", postal_code: "94103", country: "US" },
};

interface StripeAccountRow {
  customer_id: string | null;
  attached_source: string | null;
  payment_method_id: string | null;
  cardholder_id: string | null;
}

/** Maps any failure of a Stripe call to the processor errors the domain understands. */
export function toProcessorError(step: string, err: unknown): Error {
  if (err instanceof PaymentDeclinedError || err instanceof ProcessorError) return err;
  if (err instanceof Stripe.errors.StripeCardError) return new PaymentDeclinedError(err.decline_code || err.code || "card_declined");
  if (err instanceof Stripe.errors.StripeError) {
    const message =
      err instanceof Stripe.errors.StripeAuthenticationError || err instanceof Stripe.errors.StripePermissionError
        ? "Stripe refused the configured secret key."
        : err instanceof Stripe.errors.StripeConnectionError
          ? "Stripe could not be reached or did not answer in time."
          : `Stripe answered: ${err.message}`;
    return new ProcessorError(message, step, {
      ...(err.requestId ? { stripe_request_id: err.requestId } : {}),
      ...(err.rawType ? { stripe_error_type: err.rawType } : {}),
      ...(err.code ? { stripe_error_code: err.code } : {}),
      ...(err.statusCode ? { stripe_status: err.statusCode } : {}),
    });
  }
  return new ProcessorError(err instanceof Error ? err.message : String(err), step);
}

/** Stripe refused the call because the object is already past the state the call needs. */
const isUnexpectedState = (err: unknown) =>
  err instanceof Stripe.errors.StripeInvalidRequestError &&
  (err.code === "payment_intent_unexpected_state" || err.code === "resource_already_canceled" || (err.statusCode ?? 0) === 400);

/**
 * The card processor on Stripe: a PaymentIntent with manual capture is the hold on the account's
 * saved payment method, an Issuing virtual card is the card. One instance per mode (test or live
 * secret key). Every mutating call carries an Idempotency-Key derived from our ids, so a retry by
 * the recovery pass finds the object the first attempt made. The SDK does not retry on its own:
 * retries belong to the domain, which knows how to compensate.
 */
export class StripeProcessor implements Processor {
  readonly name = "stripe";
  readonly client: Stripe;
  private readonly cardholder: NonNullable<StripeProcessorOptions["cardholder"]>;

  constructor(private readonly opts: StripeProcessorOptions) {
    const base = opts.apiBase ? new URL(opts.apiBase) : undefined;
    const protocol = base?.protocol === "http:" ? "http" : "https";
    this.client = new Stripe(opts.secretKey, {
      maxNetworkRetries: 0,
      timeout: opts.timeoutMs,
      telemetry: false,
      appInfo: { name: "cardctl" },
      ...(base ? { host: base.hostname, port: base.port || (protocol === "http" ? 80 : 443), protocol } : {}),
    });
    this.cardholder = opts.cardholder ?? DEFAULT_CARDHOLDER;
  }

  private async call<T>(step: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw toProcessorError(step, err);
    }
  }

  private check(account: ProcessorAccount) {
    if (account.mode !== this.opts.mode)
      throw new ProcessorError(`This Stripe client serves ${this.opts.mode} mode, not ${account.mode}.`, "setup");
  }

  // --- per account and mode: Customer (with the payment method attached) and cardholder ---

  private async row(account: ProcessorAccount): Promise<StripeAccountRow | undefined> {
    const [row] = await queryRows(
      this.opts.ds,
      `SELECT customer_id, attached_source, payment_method_id, cardholder_id FROM stripe_accounts WHERE account_id = ? AND mode = ?`,
      [account.accountId, account.mode],
    );
    return row;
  }

  private async save(account: ProcessorAccount, fields: Partial<StripeAccountRow>): Promise<void> {
    const cols = Object.keys(fields) as (keyof StripeAccountRow)[];
    const values = cols.map((c) => fields[c] ?? null);
    const now = Date.now();
    try {
      await queryRows(
        this.opts.ds,
        `INSERT INTO stripe_accounts (account_id, mode, ${cols.join(", ")}, updated_at) VALUES (?, ?, ${cols.map(() => "?").join(", ")}, ?)`,
        [account.accountId, account.mode, ...values, now],
      );
    } catch (err) {
      if (!isUniqueViolation(err)) throw err;
      await queryRows(
        this.opts.ds,
        `UPDATE stripe_accounts SET ${cols.map((c) => `${c} = ?`).join(", ")}, updated_at = ? WHERE account_id = ? AND mode = ?`,
        [...values, now, account.accountId, account.mode],
      );
    }
  }

  /** The account's Customer in this mode with the saved payment method attached; made once. */
  private async ensureCustomer(account: ProcessorAccount, step: string): Promise<{ customerId: string; paymentMethodId: string }> {
    this.check(account);
    if (!account.paymentMethod) throw new ProcessorError("The account has no saved payment method.", step);
    const row = await this.row(account);
    let customerId = row?.customer_id ?? null;
    if (!customerId) {
      const customer = await this.call(step, () =>
        this.client.customers.create(
          { description: `cardctl account ${account.accountId}`, metadata: { account_id: account.accountId, mode: account.mode } },
          { idempotencyKey: `${account.accountId}:${account.mode}:customer` },
        ),
      );
      customerId = customer.id;
      await this.save(account, { customer_id: customerId });
    }
    if (row?.attached_source === account.paymentMethod && row.payment_method_id)
      return { customerId, paymentMethodId: row.payment_method_id };
    const pm = await this.call(step, () =>
      this.client.paymentMethods.attach(
        account.paymentMethod,
        { customer: customerId! },
        { idempotencyKey: `${account.accountId}:${account.mode}:attach:${account.paymentMethod}` },
      ),
    );
    await this.save(account, { attached_source: account.paymentMethod, payment_method_id: pm.id });
    return { customerId, paymentMethodId: pm.id };
  }

  private async ensureCardholder(account: ProcessorAccount): Promise<string> {
    this.check(account);
    const existing = (await this.row(account))?.cardholder_id;
    if (existing) return existing;
    const cardholder = await this.call("mint", () =>
      this.client.issuing.cardholders.create(
        {
          type: "company",
          name: this.cardholder.name,
          status: "active",
          billing: { address: this.cardholder.address },
          metadata: { account_id: account.accountId, mode: account.mode },
        },
        { idempotencyKey: `${account.accountId}:${account.mode}:cardholder` },
      ),
    );
    await this.save(account, { cardholder_id: cardholder.id });
    return cardholder.id;
  }

  async prepareAccount(account: ProcessorAccount): Promise<void> {
    await this.ensureCustomer(account, "setup");
  }

  // --- the hold: a PaymentIntent, manual capture, confirmed off-session ---

  async placeHold(account: ProcessorAccount, amountCents: number, idempotencyKey: string) {
    const { customerId, paymentMethodId } = await this.ensureCustomer(account, "hold");
    const pi = await this.call("hold", () =>
      this.client.paymentIntents.create(
        {
          amount: Math.max(amountCents, STRIPE_MINIMUM_CHARGE_CENTS),
          currency: "usd",
          customer: customerId,
          payment_method: paymentMethodId,
          capture_method: "manual",
          confirm: true,
          off_session: true,
        },
        { idempotencyKey },
      ),
    );
    if (pi.status === "requires_capture") return { holdId: pi.id };
    if (pi.status === "requires_payment_method" || pi.status === "requires_action" || pi.status === "requires_confirmation") {
      // Nothing is held (e.g. the bank wants the customer present); make sure it never will be.
      await this.client.paymentIntents.cancel(pi.id, {}, { idempotencyKey: `${idempotencyKey}:abandon` }).catch(() => undefined);
      const e = pi.last_payment_error;
      throw new PaymentDeclinedError(e?.decline_code || e?.code || (pi.status === "requires_action" ? "authentication_required" : "card_declined"));
    }
    throw new ProcessorError(`Stripe left the hold in status '${pi.status}'.`, "hold", { payment_intent: pi.id });
  }

  async cancelHold(account: ProcessorAccount, holdId: string, idempotencyKey: string) {
    this.check(account);
    try {
      await this.client.paymentIntents.cancel(holdId, {}, { idempotencyKey });
    } catch (err) {
      // Already canceled (or captured): nothing is held any more, which is what cancel wants.
      if (isUnexpectedState(err)) {
        const pi = await this.call("cancel", () => this.client.paymentIntents.retrieve(holdId));
        if (pi.status === "canceled" || pi.status === "succeeded") return;
      }
      throw toProcessorError("cancel", err);
    }
  }

  async captureHold(account: ProcessorAccount, holdId: string, amountCents: number, idempotencyKey: string) {
    this.check(account);
    // Stripe captures no less than its minimum charge: below it, capture the minimum and refund the rest.
    const capture = Math.max(amountCents, STRIPE_MINIMUM_CHARGE_CENTS);
    try {
      // Capturing less than the authorized amount releases the rest.
      await this.client.paymentIntents.capture(holdId, { amount_to_capture: capture }, { idempotencyKey });
    } catch (err) {
      let captured = false;
      if (isUnexpectedState(err)) {
        const pi = await this.call("capture", () => this.client.paymentIntents.retrieve(holdId));
        captured = pi.status === "succeeded";
      }
      if (!captured) throw toProcessorError("capture", err);
    }
    if (capture > amountCents)
      await this.call("capture", () =>
        this.client.refunds.create(
          { payment_intent: holdId, amount: capture - amountCents, metadata: { reason: "below_stripe_minimum_charge" } },
          { idempotencyKey: `${idempotencyKey}:refund` },
        ),
      );
  }

  // --- the card: an Issuing virtual card with an all-time limit ---

  async mintCard(
    account: ProcessorAccount,
    card: { cardId: string; amountCents: number; agentId: string | null },
    idempotencyKey: string,
  ): Promise<MintedCard> {
    const cardholder = await this.ensureCardholder(account);
    const ic = await this.call("mint", () =>
      this.client.issuing.cards.create(
        {
          cardholder,
          currency: "usd",
          type: "virtual",
          status: "active",
          spending_controls: { spending_limits: [{ amount: card.amountCents, interval: "all_time" }] },
          metadata: { card_id: card.cardId, ...(card.agentId ? { agent_id: card.agentId } : {}) },
        },
        { idempotencyKey },
      ),
    );
    return {
      processorCardId: ic.id,
      lastFour: ic.last4,
      expiration: formatExpiration(ic.exp_month, ic.exp_year),
    };
  }

  async revokeCard(account: ProcessorAccount, processorCardId: string, idempotencyKey: string) {
    this.check(account);
    try {
      await this.client.issuing.cards.update(processorCardId, { status: "canceled" }, { idempotencyKey });
    } catch (err) {
      // A canceled card cannot be updated any more: already revoked is success.
      if (err instanceof Stripe.errors.StripeInvalidRequestError) {
        const ic = await this.call("revoke", () => this.client.issuing.cards.retrieve(processorCardId));
        if (ic.status === "canceled") return;
      }
      throw toProcessorError("revoke", err);
    }
  }

  /**
   * An ephemeral key for Issuing Elements to reveal the card client-side; the PAN is never fetched
   * here. A fresh key per read; with a nonce (single use, from Stripe.js) the key derives from it.
   */
  async createEphemeralKey(account: ProcessorAccount, processorCardId: string, nonce?: string) {
    this.check(account);
    const idempotencyKey = `${processorCardId}:ephemeral_key:${nonce ? sha256(nonce).slice(0, 32) : randomToken(24)}`;
    const key = await this.call("ephemeral_key", () =>
      this.client.ephemeralKeys.create(
        { issuing_card: processorCardId, ...(nonce ? { nonce } : {}) },
        { apiVersion: EPHEMERAL_KEY_API_VERSION, idempotencyKey },
      ),
    );
    if (!key.secret) throw new ProcessorError("Stripe returned an ephemeral key without a secret.", "ephemeral_key");
    return { secret: key.secret, expiresAt: key.expires * 1000 };
  }
}
