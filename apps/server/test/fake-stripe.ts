import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import Stripe from "stripe";

/**
 * A local fake of the parts of the Stripe API the adapter uses, over HTTP, for the real stripe SDK
 * (pointed here with STRIPE_API_BASE). It records every request (method, path, form parameters as
 * sent, Idempotency-Key, Stripe-Version), replays responses by Idempotency-Key as Stripe does, keeps
 * its objects typed with the stripe package's own types, and injects failures per endpoint.
 */

export interface RecordedRequest {
  method: string;
  path: string;
  /** The form body as the SDK encoded it, flat: `spending_controls[spending_limits][0][amount]`. */
  params: Record<string, string>;
  idempotencyKey: string | undefined;
  stripeVersion: string | undefined;
  /** True when the answer came from the idempotency cache. */
  replayed: boolean;
  /** The fake's route name (as for `fail`), when one matched. */
  route?: string;
  /** The status answered; unset while (or if never) answered. */
  status?: number;
}

/**
 * error: answer with this status and Stripe error, nothing done; like Stripe, an answer of a request
 * that started executing (5xx, 402) is stored under its idempotency key and replayed to every retry
 * with that key, while one refused before (429 and other 4xx) is not. error_after: do the work,
 * then answer (and store) the error: Stripe's 5xx with an unknown outcome.
 * hang: never answer (nothing done). hang_after: do the work and cache it, then never answer
 * (the answer is "lost": a retry with the same key gets the stored result).
 */
type StripeErrorBody = Partial<Stripe.StripeRawError> & { type: string };
export type Fault =
  | { kind: "error"; status: number; error: StripeErrorBody }
  | { kind: "error_after"; status: number; error: StripeErrorBody; meanwhile?: () => void }
  | { kind: "hang" }
  | { kind: "hang_after" };

const apiError: StripeErrorBody = { type: "api_error", message: "Something went wrong on Stripe's end." };

export const faults = {
  serverError: (): Fault => ({ kind: "error", status: 500, error: apiError }),
  /** The work is done, and the answer is a 500 all the same; `meanwhile` runs between the two (other requests landing). */
  serverErrorAfter: (meanwhile?: () => void): Fault => ({ kind: "error_after", status: 500, error: apiError, meanwhile }),
  rateLimited: (): Fault => ({ kind: "error", status: 429, error: { type: "invalid_request_error", code: "rate_limit", message: "Too many requests." } }),
  decline: (decline_code = "generic_decline"): Fault => ({
    kind: "error",
    status: 402,
    error: { type: "card_error", code: "card_declined", decline_code, message: "Your card was declined." },
  }),
  hang: (): Fault => ({ kind: "hang" }),
  hangAfter: (): Fault => ({ kind: "hang_after" }),
};

type Typed<T, K extends keyof T> = Pick<T, K> & Partial<T>;
export type FakePaymentIntent = Typed<
  Stripe.PaymentIntent,
  "id" | "object" | "amount" | "amount_capturable" | "amount_received" | "currency" | "status" | "capture_method" | "customer" | "payment_method" | "livemode"
>;
export type FakeIssuingCard = Omit<
  Typed<Stripe.Issuing.Card, "id" | "object" | "last4" | "exp_month" | "exp_year" | "status" | "type" | "currency" | "metadata" | "livemode">,
  "cardholder"
> & { cardholder: Typed<Stripe.Issuing.Cardholder, "id" | "object"> };
export type FakeCardholder = Typed<
  Stripe.Issuing.Cardholder,
  "id" | "object" | "name" | "type" | "status" | "metadata" | "livemode" | "billing" | "email" | "phone_number" | "company" | "individual" | "requirements"
>;
export type FakeCustomer = Typed<Stripe.Customer, "id" | "object" | "metadata" | "livemode">;
export type FakePaymentMethod = Typed<Stripe.PaymentMethod, "id" | "object" | "type" | "customer" | "livemode">;
export type FakeEphemeralKey = Stripe.EphemeralKey;
export type FakeSetupIntent = Typed<Stripe.SetupIntent, "id" | "object" | "client_secret" | "customer" | "payment_method" | "status" | "usage" | "metadata" | "livemode">;
export type FakeRefund = Typed<Stripe.Refund, "id" | "object" | "amount" | "currency" | "payment_intent" | "status">;

/** Stripe's minimum charge in USD; it applies to creating a PaymentIntent and to what a capture takes. */
export const STRIPE_MINIMUM_CENTS = 50;

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
/** Random base62 characters, like Stripe's ids and secrets (hex would often carry card-number-like runs of digits). */
const base62 = (n: number) => [...randomBytes(n)].map((b) => BASE62[b % 62]).join("");
const rid = (prefix: string) => `${prefix}_${base62(24)}`;
/** Stripe's timestamps: Unix seconds. */
const unixNow = () => Math.floor(Date.now() / 1000);

interface Route {
  method: string;
  pattern: RegExp;
  /** Name used for fault injection, e.g. "payment_intents.create". */
  name: string;
  handle: (m: RegExpExecArray, req: RecordedRequest) => { status: number; body: unknown };
}

export class FakeStripe {
  url = "";
  readonly requests: RecordedRequest[] = [];
  readonly customers = new Map<string, FakeCustomer>();
  readonly paymentMethods = new Map<string, FakePaymentMethod & { source: string }>();
  readonly paymentIntents = new Map<string, FakePaymentIntent>();
  readonly cardholders = new Map<string, FakeCardholder>();
  readonly cards = new Map<string, FakeIssuingCard>();
  readonly ephemeralKeys: FakeEphemeralKey[] = [];
  /** What each ephemeral key (by secret) opens: one card, read under the API version it was made with. */
  readonly ephemeralKeyGrants = new Map<string, { cardId: string; apiVersion: string; nonce: string | undefined }>();
  /** Each card's number (Luhn-valid, ending in its last4) and CVC: only an ephemeral key's expanded read shows them. */
  readonly cardSecrets = new Map<string, { number: string; cvc: string }>();
  readonly refunds = new Map<string, FakeRefund>();
  private readonly refundFailures: string[] = [];
  readonly setupIntents = new Map<string, FakeSetupIntent>();
  /** Stripe's verdict on every cardholder made from now on (setCardholderState), e.g. under review at once. */
  newCardholderState: Parameters<FakeStripe["setCardholderState"]>[1] | null = null;
  private readonly idempotency = new Map<string, { route: string; params: string; status: number; body: unknown }>();
  private readonly faultQueue: { name: string; fault: Fault; times: number }[] = [];
  private server!: Server;
  private readonly routes: Route[];

  constructor(readonly secretKey = "sk_test_fake") {
    const livemode = secretKey.startsWith("sk_live_");
    const invalid = (message: string, code?: string, status = 400) => ({
      status,
      body: { error: { type: "invalid_request_error", message, ...(code ? { code } : {}) } },
    });
    const missing = (what: string, id: string) => invalid(`No such ${what}: '${id}'`, "resource_missing", 404);
    const unexpected = (pi: FakePaymentIntent, action: string) =>
      invalid(`This PaymentIntent could not be ${action} because it has a status of ${pi.status}.`, "payment_intent_unexpected_state");
    const ok = (body: unknown) => ({ status: 200, body });

    /**
     * A Stripe list: newest first, filtered by the given parameters and `created[gte|gt|lte|lt]`,
     * one page of `limit` (at most 100) after `starting_after`, and whether more follow.
     */
    const list = <T extends { id: string; created?: number }>(url: string, items: Iterable<T>, r: RecordedRequest, match: (item: T, p: Record<string, string>) => boolean) => {
      const p = r.params;
      const limit = Math.min(100, Number(p.limit ?? 10));
      const bound = (op: string, keep: (created: number, at: number) => boolean) => (item: T) =>
        p[`created[${op}]`] === undefined || keep(item.created ?? 0, Number(p[`created[${op}]`]));
      let all = [...items]
        .filter((item) => match(item, p))
        .filter(bound("gte", (c, at) => c >= at))
        .filter(bound("gt", (c, at) => c > at))
        .filter(bound("lte", (c, at) => c <= at))
        .filter(bound("lt", (c, at) => c < at))
        .reverse();
      if (p.starting_after !== undefined) {
        const at = all.findIndex((item) => item.id === p.starting_after);
        if (at < 0) return invalid(`No such object: '${p.starting_after}'`, "resource_missing", 404);
        all = all.slice(at + 1);
      }
      return ok({ object: "list", data: all.slice(0, limit), has_more: all.length > limit, url });
    };

    this.routes = [
      {
        method: "POST",
        pattern: /^\/v1\/customers$/,
        name: "customers.create",
        handle: (_m, r) => {
          const c: FakeCustomer = { id: rid("cus"), object: "customer", created: unixNow(), metadata: meta(r.params), livemode, description: r.params.description ?? null };
          this.customers.set(c.id, c);
          return ok(c);
        },
      },
      {
        method: "POST",
        pattern: /^\/v1\/payment_methods\/([^/]+)\/attach$/,
        name: "payment_methods.attach",
        handle: (m, r) => {
          const source = decodeURIComponent(m[1]!);
          if (!this.customers.has(r.params.customer ?? "")) return missing("customer", r.params.customer ?? "");
          if (/chargeCustomerFail/.test(source))
            return { status: 402, body: { error: { type: "card_error", code: "card_declined", decline_code: "generic_decline", message: "Your card was declined." } } };
          // Stripe's test tokens (pm_card_visa, …) become a new PaymentMethod when used.
          const id = source.startsWith("pm_card_") ? rid("pm") : source;
          const pm = { id, object: "payment_method" as const, type: "card", customer: r.params.customer!, livemode, source };
          this.paymentMethods.set(id, pm);
          const { source: _s, ...body } = pm;
          return ok(body);
        },
      },
      {
        method: "POST",
        pattern: /^\/v1\/payment_intents$/,
        name: "payment_intents.create",
        handle: (_m, r) => {
          const p = r.params;
          const pm = this.paymentMethods.get(p.payment_method ?? "");
          if (!pm) return missing("payment_method", p.payment_method ?? "");
          if (pm.customer !== p.customer) return invalid("The provided PaymentMethod is not attached to this customer.");
          const amount = Number(p.amount);
          if (!Number.isInteger(amount) || amount < STRIPE_MINIMUM_CENTS) return invalid("Amount must be at least $0.50 usd", "amount_too_small");
          if (/_decline$|chargeDeclined/.test(pm.source)) {
            const decline_code = /InsufficientFunds|insufficient/.test(pm.source) ? "insufficient_funds" : "generic_decline";
            return { status: 402, body: { error: { type: "card_error", code: "card_declined", decline_code, message: "Your card was declined." } } };
          }
          const manual = p.capture_method === "manual";
          const pi: FakePaymentIntent = {
            id: rid("pi"),
            object: "payment_intent",
            created: unixNow(),
            amount,
            amount_capturable: manual ? amount : 0,
            amount_received: manual ? 0 : amount,
            currency: p.currency ?? "usd",
            status: p.confirm === "true" ? (manual ? "requires_capture" : "succeeded") : "requires_confirmation",
            capture_method: manual ? "manual" : "automatic",
            customer: p.customer ?? null,
            payment_method: pm.id,
            livemode,
            metadata: meta(p),
          };
          this.paymentIntents.set(pi.id, pi);
          return ok(pi);
        },
      },
      {
        method: "GET",
        pattern: /^\/v1\/payment_intents$/,
        name: "payment_intents.list",
        // Stripe's lists are strongly consistent (search is not).
        handle: (_m, r) => list("/v1/payment_intents", this.paymentIntents.values(), r, (pi, p) => !p.customer || pi.customer === p.customer),
      },
      {
        method: "GET",
        pattern: /^\/v1\/customers$/,
        name: "customers.list",
        handle: (_m, r) => list("/v1/customers", this.customers.values(), r, () => true),
      },
      {
        method: "GET",
        pattern: /^\/v1\/payment_methods\/([^/]+)$/,
        name: "payment_methods.retrieve",
        handle: (m) => {
          const pm = this.paymentMethods.get(m[1]!);
          if (!pm) return missing("payment_method", m[1]!);
          const { source: _s, ...body } = pm;
          return ok(body);
        },
      },
      {
        method: "GET",
        pattern: /^\/v1\/refunds$/,
        name: "refunds.list",
        handle: (_m, r) => list("/v1/refunds", this.refunds.values(), r, (re, p) => !p.payment_intent || re.payment_intent === p.payment_intent),
      },
      {
        method: "GET",
        pattern: /^\/v1\/issuing\/cardholders$/,
        name: "issuing.cardholders.list",
        handle: (_m, r) => list("/v1/issuing/cardholders", this.cardholders.values(), r, () => true),
      },
      {
        method: "GET",
        pattern: /^\/v1\/issuing\/cards$/,
        name: "issuing.cards.list",
        handle: (_m, r) => list("/v1/issuing/cards", this.cards.values(), r, (c, p) => !p.cardholder || c.cardholder.id === p.cardholder),
      },
      {
        method: "GET",
        pattern: /^\/v1\/payment_intents\/([^/]+)$/,
        name: "payment_intents.retrieve",
        handle: (m) => {
          const pi = this.paymentIntents.get(m[1]!);
          return pi ? ok(pi) : missing("payment_intent", m[1]!);
        },
      },
      {
        method: "POST",
        pattern: /^\/v1\/payment_intents\/([^/]+)\/cancel$/,
        name: "payment_intents.cancel",
        handle: (m) => {
          const pi = this.paymentIntents.get(m[1]!);
          if (!pi) return missing("payment_intent", m[1]!);
          if (pi.status === "canceled" || pi.status === "succeeded") return unexpected(pi, "canceled");
          pi.status = "canceled";
          pi.amount_capturable = 0;
          pi.canceled_at = unixNow();
          return ok(pi);
        },
      },
      {
        method: "POST",
        pattern: /^\/v1\/payment_intents\/([^/]+)\/capture$/,
        name: "payment_intents.capture",
        handle: (m, r) => {
          const pi = this.paymentIntents.get(m[1]!);
          if (!pi) return missing("payment_intent", m[1]!);
          if (pi.status !== "requires_capture") return unexpected(pi, "captured");
          const amount = r.params.amount_to_capture !== undefined ? Number(r.params.amount_to_capture) : pi.amount;
          if (amount > pi.amount_capturable) return invalid("amount_to_capture exceeds the capturable amount", "amount_too_large");
          // Like Stripe: what a capture takes is a charge, so the minimum charge amount applies to it too.
          if (amount < STRIPE_MINIMUM_CENTS) return invalid("Amount must be at least $0.50 usd", "amount_too_small");
          pi.status = "succeeded";
          pi.amount_received = amount;
          pi.amount_capturable = 0;
          return ok(pi);
        },
      },
      {
        method: "POST",
        pattern: /^\/v1\/refunds$/,
        name: "refunds.create",
        handle: (_m, r) => {
          const pi = this.paymentIntents.get(r.params.payment_intent ?? "");
          if (!pi) return missing("payment_intent", r.params.payment_intent ?? "");
          if (pi.status !== "succeeded") return invalid(`This PaymentIntent (${pi.id}) does not have a successful charge to refund.`, "charge_not_refundable");
          const left = pi.amount_received - this.refunded(pi.id);
          const amount = r.params.amount !== undefined ? Number(r.params.amount) : left;
          if (!Number.isInteger(amount) || amount <= 0 || amount > left)
            return invalid(`Refund amount ($${(amount / 100).toFixed(2)}) is greater than unrefunded amount on charge ($${(left / 100).toFixed(2)})`, "amount_too_large");
          const failure = this.refundFailures.shift();
          const refund: FakeRefund = {
            id: rid("re"),
            object: "refund",
            created: unixNow(),
            amount,
            currency: pi.currency,
            payment_intent: pi.id,
            status: failure ? "failed" : "succeeded",
            ...(failure ? { failure_reason: failure } : {}),
            metadata: meta(r.params),
          };
          this.refunds.set(refund.id, refund);
          return ok(refund);
        },
      },
      {
        method: "POST",
        pattern: /^\/v1\/issuing\/cardholders$/,
        name: "issuing.cardholders.create",
        handle: (_m, r) => {
          const p = r.params;
          if (!p.name || !p.type) return invalid("Missing required param: name or type.");
          if (!p["billing[address][line1]"] || !p["billing[address][city]"] || !p["billing[address][postal_code]"] || !p["billing[address][country]"])
            return invalid("Missing required param: billing[address][line1], city, postal_code or country.", "parameter_missing");
          if (p.name.length > 24 || /[0-9]/.test(p.name)) return invalid("The cardholder name must be at most 24 characters, without digits.", "invalid_cardholder_name");
          if (p.type === "individual" && p["company[tax_id]"] !== undefined) return invalid("company can only be set for a company cardholder.");
          if (p.type === "company" && Object.keys(p).some((k) => k.startsWith("individual["))) return invalid("individual can only be set for an individual cardholder.");
          const ch: FakeCardholder = {
            id: rid("ich"),
            object: "issuing.cardholder",
            created: unixNow(),
            name: p.name,
            type: p.type as Stripe.Issuing.Cardholder["type"],
            status: (p.status ?? "active") as Stripe.Issuing.Cardholder["status"],
            metadata: meta(p),
            livemode,
            billing: { address: { line1: null, line2: null, city: null, state: null, postal_code: null, country: null } },
            email: null,
            phone_number: null,
            company: p.type === "company" ? { tax_id_provided: false } : null,
            individual: null,
            requirements: { disabled_reason: null, past_due: [] },
          };
          this.applyCardholderParams(ch, p);
          this.cardholders.set(ch.id, ch);
          if (this.newCardholderState) this.setCardholderState(ch.id, this.newCardholderState);
          return ok(ch);
        },
      },
      {
        method: "GET",
        pattern: /^\/v1\/issuing\/cardholders\/([^/]+)$/,
        name: "issuing.cardholders.retrieve",
        handle: (m) => {
          const ch = this.cardholders.get(m[1]!);
          return ch ? ok(ch) : missing("issuing.cardholder", m[1]!);
        },
      },
      {
        method: "POST",
        pattern: /^\/v1\/issuing\/cardholders\/([^/]+)$/,
        name: "issuing.cardholders.update",
        handle: (m, r) => {
          const ch = this.cardholders.get(m[1]!);
          if (!ch) return missing("issuing.cardholder", m[1]!);
          // Like Stripe: a cardholder's name and type are fixed at creation.
          for (const fixed of ["name", "type"]) if (r.params[fixed] !== undefined) return invalid(`Received unknown parameter: ${fixed}`, "parameter_unknown");
          if (ch.type === "individual" && r.params["company[tax_id]"] !== undefined) return invalid("company can only be set for a company cardholder.");
          this.applyCardholderParams(ch, r.params);
          return ok(ch);
        },
      },
      {
        method: "POST",
        pattern: /^\/v1\/issuing\/cards$/,
        name: "issuing.cards.create",
        handle: (_m, r) => {
          const p = r.params;
          const ch = this.cardholders.get(p.cardholder ?? "");
          if (!ch) return missing("cardholder", p.cardholder ?? "");
          const limit = p["spending_controls[spending_limits][0][amount]"];
          const number = luhnNumberEnding(String(1000 + Math.floor(Math.random() * 9000)));
          const card: FakeIssuingCard = {
            id: rid("ic"),
            object: "issuing.card",
            created: unixNow(),
            last4: number.slice(-4),
            exp_month: 7,
            exp_year: new Date().getUTCFullYear() + 3,
            status: (p.status ?? "inactive") as Stripe.Issuing.Card["status"],
            type: (p.type ?? "virtual") as Stripe.Issuing.Card["type"],
            currency: p.currency ?? "usd",
            metadata: meta(p),
            livemode,
            // Stripe embeds the cardholder as it is when the card is made.
            cardholder: structuredClone(ch),
            ...(limit
              ? {
                  spending_controls: {
                    spending_limits: [
                      { amount: Number(limit), interval: p["spending_controls[spending_limits][0][interval]"] as "all_time", categories: null },
                    ],
                    allowed_categories: null,
                    allowed_card_presences: null,
                    blocked_card_presences: null,
                    allowed_merchant_countries: null,
                    blocked_categories: null,
                    blocked_merchant_countries: null,
                    spending_limits_currency: "usd",
                  },
                }
              : {}),
          };
          this.cards.set(card.id, card);
          this.cardSecrets.set(card.id, { number, cvc: String(Math.floor(Math.random() * 1000)).padStart(3, "0") });
          return ok(card);
        },
      },
      {
        method: "GET",
        pattern: /^\/v1\/issuing\/cards\/([^/]+)$/,
        name: "issuing.cards.retrieve",
        handle: (m) => {
          const card = this.cards.get(m[1]!);
          return card ? ok(card) : missing("issuing.card", m[1]!);
        },
      },
      {
        method: "POST",
        pattern: /^\/v1\/issuing\/cards\/([^/]+)$/,
        name: "issuing.cards.update",
        handle: (m, r) => {
          const card = this.cards.get(m[1]!);
          if (!card) return missing("issuing.card", m[1]!);
          if (card.status === "canceled") return invalid("This card has been canceled and can no longer be updated.");
          if (r.params.status) card.status = r.params.status as Stripe.Issuing.Card["status"];
          return ok(card);
        },
      },
      {
        method: "POST",
        pattern: /^\/v1\/setup_intents$/,
        name: "setup_intents.create",
        handle: (_m, r) => {
          const p = r.params;
          if (p.customer && !this.customers.has(p.customer)) return missing("customer", p.customer);
          const id = rid("seti");
          const si: FakeSetupIntent = {
            id,
            object: "setup_intent",
            client_secret: `${id}_secret_${base62(24)}`,
            customer: p.customer ?? null,
            payment_method: null,
            status: "requires_payment_method",
            usage: p.usage ?? "off_session",
            metadata: meta(p),
            livemode,
            payment_method_types: Object.entries(p)
              .filter(([k]) => /^allowed_payment_method_types\[\d+\]$/.test(k))
              .map(([, v]) => v),
          };
          this.setupIntents.set(id, si);
          return ok(si);
        },
      },
      {
        method: "GET",
        pattern: /^\/v1\/setup_intents\/([^/]+)$/,
        name: "setup_intents.retrieve",
        handle: (m) => {
          const si = this.setupIntents.get(m[1]!);
          return si ? ok(si) : missing("setup_intent", m[1]!);
        },
      },
      {
        method: "POST",
        pattern: /^\/v1\/ephemeral_keys$/,
        name: "ephemeral_keys.create",
        handle: (_m, r) => {
          if (!r.stripeVersion) return invalid("Stripe-Version header is required to create an ephemeral key.");
          const card = this.cards.get(r.params.issuing_card ?? "");
          if (!card) return missing("issuing.card", r.params.issuing_card ?? "");
          const now = unixNow();
          const key: FakeEphemeralKey = {
            id: rid("ephkey"),
            object: "ephemeral_key",
            created: now,
            expires: now + 900,
            livemode,
            secret: `ek_${livemode ? "live" : "test"}_${base62(48)}`,
          };
          this.ephemeralKeys.push(key);
          this.ephemeralKeyGrants.set(key.secret!, { cardId: card.id, apiVersion: r.stripeVersion, nonce: r.params.nonce });
          return ok(key);
        },
      },
    ];
  }

  /**
   * Sets a cardholder's fields from create/update parameters, as Stripe keeps them: the tax id only
   * as `company.tax_id_provided` (its value is in the recorded request), an individual's missing
   * first or last name as requirements past due (which disables the cardholder until given).
   */
  private applyCardholderParams(ch: FakeCardholder, p: Record<string, string>): void {
    const address = { ...ch.billing!.address };
    for (const f of ["line1", "line2", "city", "state", "postal_code", "country"] as const)
      if (p[`billing[address][${f}]`] !== undefined) address[f] = p[`billing[address][${f}]`] || null;
    ch.billing = { address };
    if (p.email !== undefined) ch.email = p.email || null;
    if (p.phone_number !== undefined) ch.phone_number = p.phone_number || null;
    if (p.status !== undefined) ch.status = p.status as Stripe.Issuing.Cardholder["status"];
    if (p["company[tax_id]"] !== undefined) ch.company = { tax_id_provided: p["company[tax_id]"] !== "" };
    if (Object.keys(p).some((k) => /^metadata\[/.test(k))) ch.metadata = { ...ch.metadata, ...meta(p) };
    if (ch.type === "individual") {
      const first = p["individual[first_name]"] ?? ch.individual?.first_name ?? null;
      const last = p["individual[last_name]"] ?? ch.individual?.last_name ?? null;
      ch.individual = { first_name: first, last_name: last, dob: null, verification: null, card_issuing: null } as Stripe.Issuing.Cardholder.Individual;
      const names = [first ? null : "individual.first_name", last ? null : "individual.last_name"].filter((n) => n !== null);
      const others = (ch.requirements?.past_due ?? []).filter((r) => !r.startsWith("individual.") || !/_name$/.test(r));
      const pastDue = [...others, ...names];
      ch.requirements = { disabled_reason: pastDue.length ? "requirements.past_due" : ch.requirements?.disabled_reason === "requirements.past_due" ? null : (ch.requirements?.disabled_reason ?? null), past_due: pastDue };
    }
  }

  /**
   * What Stripe does to a cardholder on its own: deactivate it, disable it (requirements.
   * disabled_reason) or ask for more information (requirements.past_due). Omitted fields stay.
   */
  setCardholderState(id: string, o: { status?: Stripe.Issuing.Cardholder["status"]; disabled_reason?: string | null; past_due?: string[] }): FakeCardholder {
    const ch = this.cardholders.get(id);
    if (!ch) throw new Error(`no fake cardholder ${id}`);
    if (o.status !== undefined) ch.status = o.status;
    ch.requirements = {
      disabled_reason: (o.disabled_reason !== undefined ? o.disabled_reason : (ch.requirements?.disabled_reason ?? null)) as Stripe.Issuing.Cardholder.Requirements["disabled_reason"],
      past_due: o.past_due ?? ch.requirements?.past_due ?? [],
    };
    return ch;
  }

  /**
   * GET /v1/issuing/cards/:id authorised by an ephemeral key, as Stripe.js makes it: the key must be
   * one this fake issued, unexpired, for this card, sent with the Stripe-Version it was made under;
   * `expand[]=number` / `expand[]=cvc` add the card's number and CVC. Anything else: 401.
   */
  private readWithEphemeralKey(secret: string, r: RecordedRequest, expand: string[]): [number, unknown] {
    r.route = "issuing.cards.retrieve_with_ephemeral_key";
    const denied: [number, unknown] = [401, { error: { type: "invalid_request_error", message: "Invalid API Key provided: ek_****" } }];
    const m = /^\/v1\/issuing\/cards\/([^/]+)$/.exec(r.path);
    const grant = this.ephemeralKeyGrants.get(secret);
    const key = this.ephemeralKeys.find((k) => k.secret === secret);
    if (r.method !== "GET" || !m || !grant || !key || key.expires * 1000 <= Date.now() || grant.cardId !== m[1]) return denied;
    if (r.stripeVersion !== grant.apiVersion)
      return [400, { error: { type: "invalid_request_error", message: `Stripe-Version ${r.stripeVersion ?? "(none)"} differs from the ephemeral key's ${grant.apiVersion}.` } }];
    const card = this.cards.get(m[1]!);
    const secrets = this.cardSecrets.get(m[1]!);
    if (!card || !secrets) return denied;
    return [200, { ...card, ...(expand.includes("number") ? { number: secrets.number } : {}), ...(expand.includes("cvc") ? { cvc: secrets.cvc } : {}) }];
  }

  /**
   * What Stripe.js does when the owner submits the Payment Element (stripe.confirmSetup): the card
   * (a test token such as pm_card_visa) becomes a PaymentMethod attached to the intent's Customer,
   * and the intent succeeds. `fail`: the card is declined and the intent asks for another.
   */
  confirmSetupIntent(id: string, source = "pm_card_visa", o: { fail?: boolean } = {}): FakeSetupIntent {
    const si = this.setupIntents.get(id);
    if (!si) throw new Error(`no fake SetupIntent ${id}`);
    if (o.fail) {
      si.status = "requires_payment_method";
      return si;
    }
    const customer = typeof si.customer === "string" ? si.customer : null;
    const pm = { id: rid("pm"), object: "payment_method" as const, type: "card", customer, livemode: si.livemode, source };
    this.paymentMethods.set(pm.id, pm);
    si.payment_method = pm.id;
    si.status = "succeeded";
    return si;
  }

  /** Makes an ephemeral key (by its secret) expire now. */
  expireEphemeralKey(secret: string): void {
    const key = this.ephemeralKeys.find((k) => k.secret === secret);
    if (!key) throw new Error("no such fake ephemeral key");
    key.expires = unixNow() - 1;
  }

  /** Injects a fault into the next `times` calls of an endpoint (by route name, e.g. "payment_intents.create"). */
  fail(name: string, fault: Fault, times = 1): void {
    if (!this.routes.some((r) => r.name === name)) throw new Error(`no fake route ${name}`);
    this.faultQueue.push({ name, fault, times });
  }

  clearFaults(): void {
    this.faultQueue.length = 0;
  }

  /** The next refunds created come back `failed` at once, for these reasons (Stripe rarely does this synchronously). */
  failRefunds(...reasons: string[]): void {
    this.refundFailures.push(...reasons);
  }

  /** Cents refunded so far on a PaymentIntent (failed refunds gave nothing back). */
  refunded(paymentIntentId: string): number {
    let sum = 0;
    for (const r of this.refunds.values()) if (r.payment_intent === paymentIntentId && r.status !== "failed") sum += r.amount;
    return sum;
  }

  /** Requests to a path (exact) or matching a pattern, optionally one method. */
  calls(path: string | RegExp, method?: string): RecordedRequest[] {
    return this.requests.filter(
      (r) => (typeof path === "string" ? r.path === path : path.test(r.path)) && (method === undefined || r.method === method),
    );
  }

  async start(): Promise<this> {
    this.server = createServer((req, res) => void this.onRequest(req, res));
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async onRequest(req: IncomingMessage, res: ServerResponse) {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const url = new URL(req.url ?? "/", "http://fake");
    const body = Buffer.concat(chunks).toString("utf8");
    const params = Object.fromEntries(new URLSearchParams(req.method === "GET" ? url.search : body));
    const header = (name: string) => {
      const v = req.headers[name];
      return Array.isArray(v) ? v[0] : v;
    };
    const recorded: RecordedRequest = {
      method: req.method ?? "GET",
      path: url.pathname,
      params,
      idempotencyKey: header("idempotency-key"),
      stripeVersion: header("stripe-version"),
      replayed: false,
    };
    this.requests.push(recorded);
    const send = (status: number, payload: unknown) => {
      recorded.status = status;
      res.writeHead(status, { "content-type": "application/json", "request-id": rid("req") });
      res.end(JSON.stringify(payload));
    };
    // An ephemeral key (Issuing Elements in a browser, the SDK's cards.reveal) reads its own card, nothing else.
    const bearer = /^Bearer (.*)$/.exec(header("authorization") ?? "")?.[1];
    if (bearer?.startsWith("ek_")) return send(...this.readWithEphemeralKey(bearer, recorded, url.searchParams.getAll("expand[]")));
    if (header("authorization") !== `Bearer ${this.secretKey}`)
      return send(401, { error: { type: "invalid_request_error", message: "Invalid API Key provided." } });
    const route = this.routes.find((r) => r.method === recorded.method && r.pattern.test(recorded.path));
    recorded.route = route?.name;
    if (!route) return send(404, { error: { type: "invalid_request_error", message: `Unrecognized request URL (${recorded.method}: ${recorded.path}).` } });

    const cacheKey = recorded.idempotencyKey && recorded.method === "POST" ? recorded.idempotencyKey : undefined;
    const cached = cacheKey ? this.idempotency.get(cacheKey) : undefined;
    const paramsOf = JSON.stringify(Object.entries(params).sort(([a], [b]) => a.localeCompare(b)));
    if (cached) {
      recorded.replayed = true;
      if (cached.route !== `${recorded.method} ${recorded.path}`)
        return send(400, { error: { type: "idempotency_error", message: "Keys for idempotent requests can only be used for the same endpoint." } });
      // Like Stripe: a key replays only the request it was first used with.
      if (cached.params !== paramsOf)
        return send(400, {
          error: { type: "idempotency_error", message: "Keys for idempotent requests can only be used with the same parameters they were first used with." },
        });
      return send(cached.status, cached.body);
    }
    const remember = (status: number, body: unknown) => {
      if (cacheKey) this.idempotency.set(cacheKey, { route: `${recorded.method} ${recorded.path}`, params: paramsOf, status, body });
    };
    const queued = this.faultQueue.find((f) => f.name === route.name && f.times > 0);
    if (queued) queued.times--;
    const fault = queued?.fault;
    const executed = (status: number) => status >= 500 || status === 402;
    if (fault?.kind === "error") {
      if (executed(fault.status)) remember(fault.status, { error: fault.error });
      return send(fault.status, { error: fault.error });
    }
    if (fault?.kind === "hang") return; // never answered; the client times out
    const result = route.handle(route.pattern.exec(recorded.path)!, recorded);
    if (fault?.kind === "error_after") {
      fault.meanwhile?.();
      remember(fault.status, { error: fault.error });
      return send(fault.status, { error: fault.error });
    }
    // Stripe stores the result of any request that started executing, errors included.
    remember(result.status, result.body);
    if (fault?.kind === "hang_after") return; // done, but the answer is lost
    send(result.status, result.body);
  }
}

export async function startFakeStripe(secretKey?: string): Promise<FakeStripe> {
  return new FakeStripe(secretKey).start();
}

/** A 16-digit Visa-like number ending in `last4`, Luhn-valid: one middle digit is chosen to make the checksum work. */
export function luhnNumberEnding(last4: string): string {
  const prefix = "400000" + String(Math.floor(Math.random() * 1e5)).padStart(5, "0");
  for (let d = 0; d <= 9; d++) {
    const n = `${prefix}${d}${last4}`;
    if (luhnValid(n)) return n;
  }
  throw new Error("unreachable: one digit always completes the checksum");
}

export function luhnValid(n: string): boolean {
  let sum = 0;
  for (let i = 0; i < n.length; i++) {
    let d = Number(n[n.length - 1 - i]);
    if (i % 2 === 1) d = d * 2 > 9 ? d * 2 - 9 : d * 2;
    sum += d;
  }
  return /^\d{12,19}$/.test(n) && sum % 10 === 0;
}

function meta(params: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(params)) {
    const m = /^metadata\[(.+)\]$/.exec(k);
    if (m) out[m[1]!] = v;
  }
  return out;
}

/**
 * A webhook delivery as Stripe makes it: the event JSON and its Stripe-Signature header, signed
 * with the SDK's own test-header helper.
 */
export function signedEvent(
  type: string,
  object: unknown,
  o: { secret: string; id?: string; livemode?: boolean; timestamp?: number },
): { event: Stripe.Event; payload: string; signature: string } {
  const event = {
    id: o.id ?? rid("evt"),
    object: "event",
    api_version: Stripe.API_VERSION,
    created: unixNow(),
    livemode: o.livemode ?? false,
    pending_webhooks: 1,
    request: { id: null, idempotency_key: null },
    type,
    data: { object },
  } as unknown as Stripe.Event;
  const payload = JSON.stringify(event);
  const signature = Stripe.webhooks.generateTestHeaderString({ payload, secret: o.secret, ...(o.timestamp ? { timestamp: o.timestamp } : {}) });
  return { event, payload, signature };
}

/** An Issuing authorization on a card of the fake, as the webhooks carry it. */
export function authorizationFor(
  card: FakeIssuingCard,
  amount: number,
  o: { approved?: boolean; pending?: boolean; id?: string } = {},
): Omit<Typed<Stripe.Issuing.Authorization, "id" | "object" | "amount" | "approved" | "currency" | "livemode" | "status">, "card"> & {
  card: FakeIssuingCard;
} {
  const pending = o.pending ?? false;
  return {
    id: o.id ?? rid("iauth"),
    object: "issuing.authorization",
    amount: pending ? 0 : amount,
    approved: o.approved ?? !pending,
    currency: "usd",
    livemode: card.livemode,
    status: pending ? "pending" : o.approved === false ? "closed" : "pending",
    card,
    pending_request: pending
      ? { amount, currency: "usd", is_amount_controllable: false, merchant_amount: amount, merchant_currency: "usd", network_risk_score: null, amount_details: null }
      : null,
  };
}

/** An Issuing transaction (a capture) on a card of the fake; Stripe reports captures as negative amounts. */
export function captureTransactionFor(
  card: FakeIssuingCard,
  amount: number,
): Typed<Stripe.Issuing.Transaction, "id" | "object" | "amount" | "currency" | "type" | "livemode" | "card"> {
  return { id: rid("ipi"), object: "issuing.transaction", amount: -amount, currency: "usd", type: "capture", livemode: card.livemode, card: card.id };
}
