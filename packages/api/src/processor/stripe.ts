import Stripe from "stripe";
import type { DataSource } from "typeorm";
import { isUniqueViolation } from "../db/datasource.js";
import { placeholders, queryRows } from "../db/fast.js";
import type { Mode } from "../db/entities.js";
import type { CardholderDetails } from "../domain/accounts.js";
import { randomToken } from "../domain/ids.js";
import { sha256 } from "../domain/secrets.js";
import {
  AccountSetupError,
  excessRefundKey,
  formatExpiration,
  HoldUnavailableError,
  PaymentDeclinedError,
  ProcessorError,
  RefundFailedError,
  SetupIntentError,
  type BrowserSetup,
  type CardRefs,
  type Collected,
  type MintedCard,
  type Processor,
  type ProcessorAccount,
  type RevealEndpoint,
  type SetupAccount,
} from "./types.js";

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
  /** PUBLIC_URL: the `setup_url` of a 403 setup_required for a cardholder Stripe will not issue to. */
  publicUrl?: string;
  /** The mode's publishable key (pk_…), for Stripe.js in the dashboard; unset: no browser set-up. */
  publishableKey?: string;
}

interface StripeAccountRow {
  customer_id: string | null;
  attached_source: string | null;
  payment_method_id: string | null;
  cardholder_id: string | null;
  /** cardholderVersion() of the details the cardholder was last created or updated with. */
  cardholder_hash: string | null;
}

/**
 * One version per operator set of the cardholder details: a hash of every field and of the set's
 * random nonce, so setting A, then B, then A again yields three versions (three idempotency keys;
 * Stripe would replay the first A's answer to a repeated key and leave the cardholder at B), and
 * the hash, sent to Stripe in keys and metadata, reveals nothing of the tax id it covers.
 */
export const cardholderVersion = (d: CardholderDetails): string =>
  sha256(
    JSON.stringify([d.type, d.name, d.email, d.phone_number, d.billing.line1, d.billing.line2, d.billing.city, d.billing.state, d.billing.postal_code, d.billing.country, d.tax_id, d.updated_at, d.nonce]),
  ).slice(0, 32);

/** "Mary Ann Smith" → first "Mary Ann", last "Smith": Stripe needs both for an individual before cards activate. */
function splitName(name: string): { first_name: string; last_name: string } {
  const words = name.trim().split(/\s+/);
  const last = words.length > 1 ? words.pop()! : words[0]!;
  return { first_name: words.join(" "), last_name: last };
}

/** What a cardholder create and update both send: billing address, contact, and the type's own details. */
function cardholderFields(d: CardholderDetails) {
  const b = d.billing;
  return {
    billing: {
      address: {
        line1: b.line1,
        ...(b.line2 !== null ? { line2: b.line2 } : {}),
        city: b.city,
        ...(b.state !== null ? { state: b.state } : {}),
        postal_code: b.postal_code,
        country: b.country,
      },
    },
    ...(d.email !== null ? { email: d.email } : {}),
    ...(d.phone_number !== null ? { phone_number: d.phone_number } : {}),
    ...(d.type === "company" && d.tax_id !== null ? { company: { tax_id: d.tax_id } } : {}),
    ...(d.type === "individual" ? { individual: splitName(d.name) } : {}),
  };
}

/**
 * Whether the cardholder at Stripe can take the new details by an update. Stripe cannot change a
 * cardholder's type or name (the name is printed on its cards), and an update only sets fields, so
 * details that drop a field Stripe holds (email, phone, line2, state, tax id) need a new cardholder.
 */
function updatable(current: Stripe.Issuing.Cardholder, d: CardholderDetails): boolean {
  if (current.type !== d.type || current.name !== d.name) return false;
  const address = current.billing?.address;
  return !(
    (current.email && d.email === null) ||
    (current.phone_number && d.phone_number === null) ||
    (address?.line2 && d.billing.line2 === null) ||
    (address?.state && d.billing.state === null) ||
    (current.company?.tax_id_provided && d.tax_id === null)
  );
}

/** Why Stripe will not let the cardholder's cards be used, or null: not active, disabled, or requirements past due. */
function cardholderProblem(ch: Stripe.Issuing.Cardholder): string | null {
  const reasons: string[] = [];
  if (ch.status !== "active") reasons.push(`its status at Stripe is '${ch.status}'`);
  const disabled = ch.requirements?.disabled_reason;
  if (disabled) reasons.push(`Stripe disabled it (requirements.disabled_reason '${disabled}')`);
  const pastDue = ch.requirements?.past_due ?? [];
  if (pastDue.length > 0) reasons.push(`Stripe needs ${pastDue.join(", ")} (requirements.past_due)`);
  if (reasons.length === 0) return null;
  return (
    `Stripe will not issue cards to this account's cardholder (${ch.id}): ${reasons.join("; ")}. ` +
    "Update the details with POST /admin/v1/accounts/:id/cardholder (cardctl accounts set-cardholder), or resolve it in the Stripe Dashboard."
  );
}

/** Why a refund did not reach the customer (failed or canceled at Stripe); null while it stands. */
export function refundFailure(re: { id: string; status?: string | null; failure_reason?: string | null }): string | null {
  if (re.status !== "failed" && re.status !== "canceled") return null;
  return `Stripe refund ${re.id} ${re.status}${re.failure_reason ? ` (${re.failure_reason})` : ""}`;
}

/** Maps any failure of a Stripe call to the processor errors the domain understands. */
export function toProcessorError(step: string, err: unknown): Error {
  if (err instanceof PaymentDeclinedError || err instanceof ProcessorError || err instanceof HoldUnavailableError || err instanceof AccountSetupError) return err;
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

const BUSY_RETRIES = 3;

/** Stripe's 409: a request under the same idempotency key is still running (idempotency_key_in_use). */
const isKeyInUse = (err: unknown) => err instanceof Stripe.errors.StripeError && (err.statusCode === 409 || err.code === "idempotency_key_in_use");

/**
 * Stripe's "try again shortly": 429 (rate limited), lock_timeout (another request holds the
 * object) and 409 idempotency_key_in_use (a request under the same key is still running). None is
 * stored under the idempotency key, so the same call is sent again, under the same key, after a
 * backoff with jitter: 100, 200, 400 ms. Nothing is sent once `signal` (the domain's deadline) aborted.
 */
async function retrying<T>(fn: () => Promise<T>, signal?: AbortSignal): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    signal?.throwIfAborted();
    try {
      return await fn();
    } catch (err) {
      const busy = err instanceof Stripe.errors.StripeRateLimitError || (err instanceof Stripe.errors.StripeError && err.code === "lock_timeout") || isKeyInUse(err);
      if (!busy || attempt > BUSY_RETRIES) throw err;
      await new Promise((r) => setTimeout(r, 100 * 2 ** (attempt - 1) * (0.75 + Math.random() * 0.5)));
    }
  }
}

/** A 5xx: the outcome is unknown, and Stripe stores the answer under the idempotency key for every retry. */
const isStoredServerError = (err: unknown) => err instanceof Stripe.errors.StripeError && (err.statusCode ?? 0) >= 500;

/**
 * A mutating call under `key` (DESIGN 3.6). After a 5xx the same key would answer that 5xx
 * forever, and the work may or may not have been done: the object is read first (`read`: by its
 * id or our metadata, never by sending the call again), and only when the work is not found done is
 * the call sent again, with the same parameters, under a new attempt key of its own. The same
 * holds when Stripe refuses the key for other parameters (an idempotency_error): an attempt whose
 * answer was lost ran with what was current then (the payment method the account had), and
 * what it made is found by reading. Past the domain's deadline (`signal`), it is not sent again.
 */
async function keyed<T>(key: string, send: (key: string) => Promise<T>, read: () => Promise<T | null | undefined>, signal?: AbortSignal): Promise<T> {
  try {
    return await send(key);
  } catch (err) {
    // A key still in use is no key refused for other parameters: a new key beside it could do the work twice.
    if (isKeyInUse(err) || (!isStoredServerError(err) && !(err instanceof Stripe.errors.StripeIdempotencyError))) throw err;
    const found = await read();
    if (found) return found;
    signal?.throwIfAborted();
    return send(`${key}:${randomToken(8)}`);
  }
}

/**
 * Lookups by our metadata read every page of a list (its auto-pagination), newest first, of the
 * objects made since a time: an object beyond the first page must still be found, or recovery would
 * make it twice (a second hold on the customer's card). Stripe's clock and ours differ: the window
 * opens this long before.
 */
const CLOCK_MARGIN_S = 15 * 60;
/** A list's `created` filter: from `ms` (our clock), less the margin. */
const createdSince = (ms: number) => ({ gte: Math.floor(ms / 1000) - CLOCK_MARGIN_S });
/** Stripe answers a key's stored 5xx for 24 hours: an object that answer hides was made within them. */
const KEY_REPLAY_MS = 24 * 3600 * 1000;
/** How long after the record of cardholders began instances of the older version may still run (a rolling upgrade). */
const UPGRADE_WINDOW_MS = 24 * 3600 * 1000;

/** The first object of a list, read page by page, that `match` takes; null when none does. */
async function firstListed<T>(list: Stripe.ApiListPromise<T>, match: (item: T) => boolean): Promise<T | null> {
  for await (const item of list) if (match(item)) return item;
  return null;
}

/** Every item of a list (every page of it) that matches, in the list's order (newest first). */
async function allListed<T>(list: Stripe.ApiListPromise<T>, match: (item: T) => boolean): Promise<T[]> {
  const found: T[] = [];
  for await (const item of list) if (match(item)) found.push(item);
  return found;
}

/** Whether `metadata` holds every entry of `wanted`. */
const sameMetadata = (metadata: Stripe.Metadata | null | undefined, wanted: Record<string, string>) =>
  Object.entries(wanted).every(([k, v]) => metadata?.[k] === v);

/** Whether a PaymentIntent is a hold placed for our card (placeHold's metadata). */
const holdOf = (refs: CardRefs) => (p: Stripe.PaymentIntent) => p.metadata?.card_id === refs.cardId && p.metadata?.purpose === "hold";

/** What the domain keeps of an Issuing card. */
const minted = (ic: Stripe.Issuing.Card): MintedCard => ({ processorCardId: ic.id, lastFour: ic.last4, expiration: formatExpiration(ic.exp_month, ic.exp_year) });

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
  }

  private async call<T>(step: string, fn: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    try {
      return await retrying(fn, signal);
    } catch (err) {
      throw toProcessorError(step, err);
    }
  }

  private check(account: SetupAccount) {
    if (account.mode !== this.opts.mode)
      throw new ProcessorError(`This Stripe client serves ${this.opts.mode} mode, not ${account.mode}.`, "setup");
  }

  // --- per account and mode: Customer (with the payment method attached) and cardholder ---

  private async row(account: SetupAccount): Promise<StripeAccountRow | undefined> {
    const [row] = await queryRows(
      this.opts.ds,
      `SELECT customer_id, attached_source, payment_method_id, cardholder_id, cardholder_hash FROM stripe_accounts WHERE account_id = ? AND mode = ?`,
      [account.accountId, account.mode],
    );
    return row;
  }

  private async save(account: SetupAccount, fields: Partial<StripeAccountRow>): Promise<void> {
    const cols = Object.keys(fields) as (keyof StripeAccountRow)[];
    const values = cols.map((c) => fields[c] ?? null);
    const now = Date.now();
    try {
      await queryRows(
        this.opts.ds,
        `INSERT INTO stripe_accounts (account_id, mode, ${cols.join(", ")}, updated_at) VALUES (?, ?, ${placeholders(cols)}, ?)`,
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

  /** The account's Customer in this mode, made once (with or without a payment method yet). */
  private async ensureCustomerId(account: SetupAccount, step: string, row: StripeAccountRow | undefined, signal?: AbortSignal): Promise<string> {
    if (row?.customer_id) return row.customer_id;
    const metadata = { account_id: account.accountId, mode: account.mode };
    const customer = await this.call(step, () =>
      keyed(
        `${account.accountId}:${account.mode}:customer`,
        (idempotencyKey) => this.client.customers.create({ description: `cardctl account ${account.accountId}`, metadata }, { idempotencyKey }),
        () => firstListed(this.client.customers.list({ created: createdSince(Date.now() - KEY_REPLAY_MS), limit: 100 }), (c) => sameMetadata(c.metadata, metadata)),
        signal,
      ),
      signal,
    );
    await this.save(account, { customer_id: customer.id });
    return customer.id;
  }

  /** The account's Customer in this mode with the saved payment method attached; made once. */
  private async ensureCustomer(account: ProcessorAccount, step: string, signal?: AbortSignal): Promise<{ customerId: string; paymentMethodId: string }> {
    this.check(account);
    if (!account.paymentMethod) throw new ProcessorError("The account has no saved payment method.", step);
    const row = await this.row(account);
    const customerId = await this.ensureCustomerId(account, step, row, signal);
    if (row?.attached_source === account.paymentMethod && row.payment_method_id)
      return { customerId, paymentMethodId: row.payment_method_id };
    const pm = await this.call(step, () =>
      keyed(
        `${account.accountId}:${account.mode}:attach:${account.paymentMethod}`,
        (idempotencyKey) => this.client.paymentMethods.attach(account.paymentMethod, { customer: customerId }, { idempotencyKey }),
        // A saved pm_… is itself the attached method; a test token (pm_card_visa) makes a new one each time.
        async () => {
          const found = await this.client.paymentMethods.retrieve(account.paymentMethod);
          return found.customer === customerId ? found : null;
        },
        signal,
      ),
      signal,
    );
    await this.save(account, { attached_source: account.paymentMethod, payment_method_id: pm.id });
    return { customerId, paymentMethodId: pm.id };
  }

  private setupError(message: string): AccountSetupError {
    return new AccountSetupError(message, ["cardholder"], this.opts.publicUrl ? `${this.opts.publicUrl}/setup` : undefined);
  }

  /** The cardholder details the operator set on the account (DESIGN 3.3), or null. */
  private async cardholderDetails(account: ProcessorAccount): Promise<CardholderDetails | null> {
    const [row] = await queryRows(this.opts.ds, `SELECT cardholder FROM accounts WHERE id = ?`, [account.accountId]);
    const json = row?.cardholder as string | null | undefined;
    return json ? (JSON.parse(json) as CardholderDetails) : null;
  }

  /**
   * The account's Issuing cardholder in this mode, made from the operator's details, and checked
   * for use: a cardholder Stripe has deactivated or disabled, or with requirements past due, is a
   * 403 setup_required (`cardholder` missing), raised before the card is created (the hold placed
   * before it is cancelled by the failed mint's compensation, so nothing stays held).
   *
   * New details reach Stripe on the next card: the existing cardholder is UPDATED when Stripe can
   * take the change (billing address, email, phone, tax id, an individual's names), so the account
   * keeps one cardholder whose verification state and card history carry over, and no orphan
   * cardholders pile up at Stripe. A change of type or name (Stripe cannot update either; the name
   * is printed on cards), or one that drops a field Stripe holds, makes a NEW cardholder; cards
   * already issued stay with the old one, as cards cannot move. Both calls carry an idempotency key
   * of the details' version (cardholderVersion), so a retry after a lost answer finds what the first
   * attempt made, and a later set of the same details is a new version, never a replay.
   */
  private async ensureCardholder(account: ProcessorAccount, signal?: AbortSignal): Promise<string> {
    this.check(account);
    const details = await this.cardholderDetails(account);
    if (!details)
      throw this.setupError(
        "The account has no cardholder details: Stripe issues cards to a cardholder, which the operator sets with POST /admin/v1/accounts/:id/cardholder (cardctl accounts set-cardholder).",
      );
    const version = cardholderVersion(details);
    const row = await this.row(account);
    const existing = row?.cardholder_id ?? null;
    let cardholder: Stripe.Issuing.Cardholder;
    if (existing && row?.cardholder_hash === version) {
      // Up to date with the details; read it for what Stripe says about it now.
      cardholder = await this.call("mint", () => this.client.issuing.cardholders.retrieve(existing), signal);
    } else {
      const current = existing ? await this.call("mint", () => this.client.issuing.cardholders.retrieve(existing), signal) : null;
      const metadata = { account_id: account.accountId, mode: account.mode, details_version: version };
      const key = `${account.accountId}:${account.mode}:cardholder:${version}`;
      // Stripe's 400 about the details (a name it will not print, say) is the operator's to fix:
      // set-up, not a processor failure, so no card is tried on them until they change.
      const refused = (err: unknown): never => {
        if (err instanceof Stripe.errors.StripeInvalidRequestError)
          throw this.setupError(
            `Stripe refused the cardholder's details${err.param ? ` (${err.param})` : ""}: ${err.message} Fix them with POST /admin/v1/accounts/:id/cardholder (cardctl accounts set-cardholder).`,
          );
        throw err;
      };
      cardholder =
        current && updatable(current, details)
          ? await this.call("mint", () =>
              keyed(
                `${key}:update`,
                (idempotencyKey) => this.client.issuing.cardholders.update(current.id, { ...cardholderFields(details), metadata }, { idempotencyKey }).catch(refused),
                async () => {
                  const ch = await this.client.issuing.cardholders.retrieve(current.id);
                  return ch.metadata?.details_version === version ? ch : null;
                },
                signal,
              ),
              signal,
            )
          : await this.call("mint", () =>
              keyed(
                key,
                (idempotencyKey) =>
                  this.client.issuing.cardholders
                    .create({ type: details.type, name: details.name, status: "active", ...cardholderFields(details), metadata }, { idempotencyKey })
                    .catch(refused),
                () =>
                  firstListed(this.client.issuing.cardholders.list({ created: createdSince(Date.now() - KEY_REPLAY_MS), limit: 100 }), (ch) =>
                    sameMetadata(ch.metadata, metadata),
                  ),
                signal,
              ),
              signal,
            );
      // Recorded before any card is minted under it, so findCards lists its cards; the one it
      // replaces too (an instance of an older version may have made it unrecorded).
      if (existing) await this.recordCardholder(account, existing);
      if (cardholder.id !== existing) await this.recordCardholder(account, cardholder.id);
      await this.save(account, { cardholder_id: cardholder.id, cardholder_hash: version });
    }
    const problem = cardholderProblem(cardholder);
    if (problem) throw this.setupError(problem);
    return cardholder.id;
  }

  private async recordCardholder(account: SetupAccount, cardholderId: string): Promise<void> {
    try {
      await queryRows(this.opts.ds, `INSERT INTO stripe_cardholders (cardholder_id, account_id, mode, created_at, backfilled) VALUES (?, ?, ?, ?, 0)`, [
        cardholderId,
        account.accountId,
        account.mode,
        Date.now(),
      ]);
    } catch (err) {
      if (!isUniqueViolation(err)) throw err; // a replayed create, recorded by the attempt that made it
    }
  }

  /**
   * Every cardholder the account has had in this mode (a few: one per change of name or type), any
   * of which a card may have been minted under; null when that is not known for a card made at
   * `createdAt`: the record began (its migration copied in the then-current cardholder) less than
   * UPGRADE_WINDOW_MS before the card, while instances of the older version may still have made
   * cardholders unrecorded, or the current cardholder is not in it (made by such an instance).
   */
  private async cardholdersOf(account: ProcessorAccount, createdAt: number): Promise<string[] | null> {
    const [rows, row] = await Promise.all([
      queryRows(this.opts.ds, `SELECT cardholder_id, created_at, backfilled FROM stripe_cardholders WHERE account_id = ? AND mode = ?`, [account.accountId, account.mode]),
      this.row(account),
    ]);
    // Instances' clocks differ a little, as ours and Stripe's do.
    const from = createdAt - CLOCK_MARGIN_S * 1000;
    if (rows.some((r) => Number(r.backfilled) === 1 && Number(r.created_at) + UPGRADE_WINDOW_MS > from)) return null;
    const ids = rows.map((r) => r.cardholder_id as string);
    return row?.cardholder_id && !ids.includes(row.cardholder_id) ? null : ids;
  }

  async prepareAccount(account: ProcessorAccount, signal?: AbortSignal): Promise<void> {
    await this.ensureCustomer(account, "setup", signal);
  }

  // --- the payment method entered by the owner in the browser: a SetupIntent, Stripe.js ---

  get browserSetup(): BrowserSetup {
    return {
      publishableKey: this.opts.publishableKey,
      start: (account, attempt, signal) => this.startSetupIntent(account, attempt, signal),
      finish: (account, intentId, signal) => this.finishSetupIntent(account, intentId, signal),
    };
  }

  /**
   * A SetupIntent for the account's Customer (card only, for off-session use: the holds), which
   * the dashboard confirms with the Payment Element. Idempotent: the key names the account, mode
   * and `attempt` (the domain's: what is saved now), so reloading the page finds the same intent;
   * one already used up (succeeded or canceled) is replaced by a new one.
   */
  private async startSetupIntent(account: SetupAccount, attempt: string, signal?: AbortSignal): Promise<{ id: string; clientSecret: string }> {
    this.check(account);
    const customer = await this.ensureCustomerId(account, "setup", await this.row(account), signal);
    const metadata = { account_id: account.accountId, mode: account.mode, purpose: "payment_method" };
    const create = (key: string) =>
      this.call("setup", () =>
        keyed(
          key,
          (idempotencyKey) =>
            this.client.setupIntents.create({ customer, allowed_payment_method_types: ["card"], usage: "off_session", metadata }, { idempotencyKey }),
          // An unconfirmed SetupIntent too many is harmless: after a 5xx, a new one.
          async () => null,
          signal,
        ),
        signal,
      );
    const key = `${account.accountId}:${account.mode}:setup_intent:${attempt}`;
    let si = await create(key);
    // A replayed answer shows the intent as it was made: read what it is now.
    const now = await this.call("setup", () => this.client.setupIntents.retrieve(si.id), signal);
    if (now.status === "succeeded" || now.status === "canceled") si = await create(`${key}:${randomToken(8)}`);
    if (!si.client_secret) throw new ProcessorError("Stripe returned a SetupIntent without a client secret.", "setup");
    return { id: si.id, clientSecret: si.client_secret };
  }

  /**
   * The payment method of a SetupIntent the browser confirmed, read from Stripe (never taken from
   * the browser): only an intent made for this account's Customer in this mode, and succeeded.
   * Stripe attached the method to the Customer on success; it is recorded as attached, so saving
   * it (prepareAccount) attaches nothing again.
   */
  private async finishSetupIntent(account: SetupAccount, intentId: string, signal?: AbortSignal): Promise<{ paymentMethod: string }> {
    this.check(account);
    const notFound = () => new SetupIntentError(`No SetupIntent ${intentId} of this account.`, "not_found");
    const row = await this.row(account);
    if (!row?.customer_id || !/^seti_[A-Za-z0-9]+$/.test(intentId)) throw notFound();
    let si: Stripe.SetupIntent;
    try {
      si = await retrying(() => this.client.setupIntents.retrieve(intentId), signal);
    } catch (err) {
      if (err instanceof Stripe.errors.StripeInvalidRequestError && err.statusCode === 404) throw notFound();
      throw toProcessorError("setup", err);
    }
    const customer = typeof si.customer === "string" ? si.customer : si.customer?.id;
    if (customer !== row.customer_id || si.metadata?.account_id !== account.accountId || si.metadata?.mode !== account.mode) throw notFound();
    const pm = typeof si.payment_method === "string" ? si.payment_method : si.payment_method?.id;
    if (si.status !== "succeeded" || !pm)
      throw new SetupIntentError(`The SetupIntent ${intentId} has not succeeded (status '${si.status}'): the card was not confirmed.`, "not_succeeded", si.status);
    await this.save(account, { attached_source: pm, payment_method_id: pm });
    return { paymentMethod: pm };
  }

  // --- the hold: a PaymentIntent, manual capture, confirmed off-session ---

  async placeHold(account: ProcessorAccount, amountCents: number, refs: CardRefs, idempotencyKey: string, signal?: AbortSignal) {
    const { customerId, paymentMethodId } = await this.ensureCustomer(account, "hold", signal);
    const pi = await this.call("hold", () =>
      keyed(
        idempotencyKey,
        (key) =>
          this.client.paymentIntents.create(
            {
              amount: Math.max(amountCents, STRIPE_MINIMUM_CHARGE_CENTS),
              currency: "usd",
              customer: customerId,
              payment_method: paymentMethodId,
              // Only cards (this API version names it allowed_payment_method_types, formerly
              // payment_method_types): no redirect-based method can be chosen, so no return_url is needed.
              allowed_payment_method_types: ["card"],
              capture_method: "manual",
              confirm: true,
              off_session: true,
              metadata: { card_id: refs.cardId, account_id: account.accountId, purpose: "hold" },
            },
            { idempotencyKey: key },
          ),
        async () => {
          const found = await firstListed(this.intentsSince(customerId, refs.createdAt), holdOf(refs));
          return found?.status === "canceled" ? null : found;
        },
        signal,
      ),
      signal,
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

  /**
   * The customer's PaymentIntents made since `sinceMs` (our card's creation), newest first: a list
   * (consistent at once, unlike search), read page by page by firstListed or allListed.
   */
  private intentsSince(customerId: string, sinceMs: number): Stripe.ApiListPromise<Stripe.PaymentIntent> {
    return this.client.paymentIntents.list({ customer: customerId, created: createdSince(sinceMs), limit: 100 });
  }

  /** The card's holds, found by their metadata among the customer's PaymentIntents made since our card. */
  async findHolds(account: ProcessorAccount, refs: CardRefs, signal?: AbortSignal) {
    this.check(account);
    const customerId = (await this.row(account))?.customer_id;
    if (!customerId) return [];
    const intents = await this.call("hold", () =>
      allListed(this.intentsSince(customerId, refs.createdAt), holdOf(refs)),
      signal,
    );
    // Any other status holds nothing (placeHold cancels a hold Stripe left unconfirmed).
    return intents.map((pi) => ({
      holdId: pi.id,
      status: pi.status === "requires_capture" ? ("held" as const) : pi.status === "succeeded" ? ("captured" as const) : ("canceled" as const),
    }));
  }

  async cancelHold(account: ProcessorAccount, holdId: string, idempotencyKey: string, signal?: AbortSignal) {
    this.check(account);
    // Canceled (or captured): nothing is held any more, which is what cancel wants.
    const done = async () => {
      const pi = await this.client.paymentIntents.retrieve(holdId);
      return pi.status === "canceled" || pi.status === "succeeded" ? pi : null;
    };
    try {
      await retrying(() => keyed(idempotencyKey, (key) => this.client.paymentIntents.cancel(holdId, {}, { idempotencyKey: key }), done, signal), signal);
    } catch (err) {
      if (!(isUnexpectedState(err) && (await this.call("cancel", done, signal)))) throw toProcessorError("cancel", err);
    }
  }

  async captureHold(account: ProcessorAccount, holdId: string, amountCents: number, idempotencyKey: string, signal?: AbortSignal) {
    this.check(account);
    // Stripe captures no less than its minimum charge: below it, capture the minimum and refund the rest.
    const capture = Math.max(amountCents, STRIPE_MINIMUM_CHARGE_CENTS);
    const captured = async () => {
      const pi = await this.client.paymentIntents.retrieve(holdId);
      if (pi.status === "canceled") throw new HoldUnavailableError(holdId);
      return pi.status === "succeeded" ? pi : null;
    };
    try {
      // Capturing less than the authorized amount releases the rest.
      await retrying(() =>
        keyed(idempotencyKey, (key) => this.client.paymentIntents.capture(holdId, { amount_to_capture: capture }, { idempotencyKey: key }), captured, signal),
        signal,
      );
    } catch (err) {
      if (!(isUnexpectedState(err) && (await this.call("capture", captured, signal)))) throw toProcessorError("capture", err);
    }
    return capture > amountCents ? this.refundExcess("capture", holdId, capture - amountCents, idempotencyKey, signal) : {};
  }

  // --- money beyond the hold, and money back ---

  async chargeOffSession(account: ProcessorAccount, amountCents: number, refs: CardRefs & { paymentId: string }, idempotencyKey: string, signal?: AbortSignal) {
    const { customerId, paymentMethodId } = await this.ensureCustomer(account, "charge", signal);
    // Below Stripe's minimum the charge is the minimum and the difference is refunded at once.
    const amount = Math.max(amountCents, STRIPE_MINIMUM_CHARGE_CENTS);
    const pi = await this.call("charge", () =>
      keyed(
        idempotencyKey,
        (key) =>
          this.client.paymentIntents.create(
            {
              amount,
              currency: "usd",
              customer: customerId,
              payment_method: paymentMethodId,
              allowed_payment_method_types: ["card"],
              confirm: true,
              off_session: true,
              metadata: { card_id: refs.cardId, account_id: account.accountId, payment_id: refs.paymentId, purpose: "charge" },
            },
            { idempotencyKey: key },
          ),
        () => firstListed(this.intentsSince(customerId, refs.createdAt), (p) => p.metadata?.payment_id === refs.paymentId && p.metadata?.purpose === "charge"),
        signal,
      ),
      signal,
    );
    if (pi.status !== "succeeded") {
      const e = pi.last_payment_error;
      throw new PaymentDeclinedError(e?.decline_code || e?.code || (pi.status === "requires_action" ? "authentication_required" : "card_declined"));
    }
    const collected = amount > amountCents ? await this.refundExcess("charge", pi.id, amount - amountCents, idempotencyKey, signal) : {};
    return { ...collected, paymentId: pi.id };
  }

  /** Refunds what Stripe's minimum charge took beyond the payment made under `key`; a refund failed at once is reported, not thrown (the money moved). */
  private async refundExcess(step: string, paymentIntent: string, excess: number, key: string, signal?: AbortSignal): Promise<Collected> {
    const failure = refundFailure(await this.refundOnce(step, paymentIntent, excess, excessRefundKey(key), signal, "below_stripe_minimum_charge"));
    return failure ? { excessRefundFailure: failure } : {};
  }

  async refund(account: ProcessorAccount, paymentId: string, amountCents: number, idempotencyKey: string, signal?: AbortSignal) {
    this.check(account);
    // Usually a refund fails later (refund.failed); one failed at once is as definite.
    const failure = refundFailure(await this.refundOnce("refund", paymentId, amountCents, idempotencyKey, signal));
    if (failure) throw new RefundFailedError(failure);
  }

  /** A refund labelled with its key (metadata `request`), so a retry after a 5xx finds it among the payment's refunds. */
  private refundOnce(step: string, paymentIntent: string, amount: number, request: string, signal: AbortSignal | undefined, reason?: string) {
    const metadata = { request, ...(reason ? { reason } : {}) };
    return this.call(step, () =>
      keyed(
        request,
        (key) => this.client.refunds.create({ payment_intent: paymentIntent, amount, metadata }, { idempotencyKey: key }),
        () => firstListed(this.client.refunds.list({ payment_intent: paymentIntent, limit: 100 }), (r) => r.metadata?.request === request),
        signal,
      ),
      signal,
    );
  }

  // --- the card: an Issuing virtual card with an all-time limit ---

  async mintCard(
    account: ProcessorAccount,
    card: CardRefs & { amountCents: number; agentId: string | null },
    idempotencyKey: string,
    signal?: AbortSignal,
  ): Promise<MintedCard> {
    const cardholder = await this.ensureCardholder(account, signal);
    const ic = await this.call("mint", () =>
      keyed(
        idempotencyKey,
        (key) =>
          this.client.issuing.cards.create(
            {
              cardholder,
              currency: "usd",
              type: "virtual",
              status: "active",
              spending_controls: { spending_limits: [{ amount: card.amountCents, interval: "all_time" }] },
              metadata: { card_id: card.cardId, ...(card.agentId ? { agent_id: card.agentId } : {}) },
            },
            { idempotencyKey: key },
          ),
        () => this.issuingCardOf(cardholder, card),
        signal,
      ),
      signal,
    );
    return minted(ic);
  }

  /** Our card's Issuing card, by metadata, among the cardholder's cards made since our card. */
  private issuingCardOf(cardholder: string, refs: CardRefs): Promise<Stripe.Issuing.Card | null> {
    return firstListed(this.client.issuing.cards.list({ cardholder, created: createdSince(refs.createdAt), limit: 100 }), (c) => c.metadata?.card_id === refs.cardId);
  }

  /**
   * Our card's Issuing cards, among the cards made since our card of every cardholder of the
   * account it may have been minted under: not only the current one (details replaced since, a new
   * name or type making a new cardholder, would leave a live card behind). Where the record of
   * cardholders cannot say (see cardholdersOf), among every Issuing card of the platform made since.
   */
  async findCards(account: ProcessorAccount, refs: CardRefs, signal?: AbortSignal) {
    this.check(account);
    const cardholders = await this.cardholdersOf(account, refs.createdAt);
    const ours = (c: Stripe.Issuing.Card) => c.metadata?.card_id === refs.cardId;
    const listed = (cardholder?: string) =>
      allListed(this.client.issuing.cards.list({ ...(cardholder ? { cardholder } : {}), created: createdSince(refs.createdAt), limit: 100 }), ours);
    const cards = await this.call("mint", async () => (cardholders ? (await Promise.all(cardholders.map(listed))).flat() : await listed()), signal);
    return cards.map(minted);
  }

  async revokeCard(account: ProcessorAccount, processorCardId: string, idempotencyKey: string, signal?: AbortSignal) {
    this.check(account);
    // A canceled card cannot be updated any more: already revoked is success.
    const canceled = async () => {
      const ic = await this.client.issuing.cards.retrieve(processorCardId);
      return ic.status === "canceled" ? ic : null;
    };
    try {
      await retrying(() =>
        keyed(idempotencyKey, (key) => this.client.issuing.cards.update(processorCardId, { status: "canceled" }, { idempotencyKey: key }), canceled, signal),
        signal,
      );
    } catch (err) {
      if (!(err instanceof Stripe.errors.StripeInvalidRequestError && (await this.call("revoke", canceled, signal)))) throw toProcessorError("revoke", err);
    }
  }

  /**
   * An ephemeral key for Issuing Elements to reveal the card client-side; the PAN is never fetched
   * here. A fresh key per read; with a nonce (single use, from Stripe.js) the key derives from it.
   */
  async createEphemeralKey(account: ProcessorAccount, processorCardId: string, nonce?: string, signal?: AbortSignal) {
    this.check(account);
    const idempotencyKey = `${processorCardId}:ephemeral_key:${nonce ? sha256(nonce).slice(0, 32) : randomToken(24)}`;
    const key = await this.call("ephemeral_key", () =>
      this.client.ephemeralKeys.create(
        { issuing_card: processorCardId, ...(nonce ? { nonce } : {}) },
        { apiVersion: EPHEMERAL_KEY_API_VERSION, idempotencyKey },
      ),
      signal,
    );
    if (!key.secret) throw new ProcessorError("Stripe returned an ephemeral key without a secret.", "ephemeral_key");
    return { secret: key.secret, expiresAt: key.expires * 1000 };
  }

  /** Stripe's own card retrieval, as Issuing Elements calls it with the ephemeral key (on STRIPE_API_BASE when set). */
  revealEndpoint(processorCardId: string): RevealEndpoint {
    const base = (this.opts.apiBase ?? "https://api.stripe.com").replace(/\/+$/, "");
    return { url: `${base}/v1/issuing/cards/${encodeURIComponent(processorCardId)}`, apiVersion: EPHEMERAL_KEY_API_VERSION };
  }
}
