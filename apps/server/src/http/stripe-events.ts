import Stripe from "stripe";
import { z } from "zod";

/**
 * The Stripe webhook events POST /v1/webhooks/stripe accepts, as zod schemas. A valid signature
 * says who sent a payload, not that it is well formed: an event is validated here before anything
 * (the event log, the purchase path, a response header) uses it.
 *
 * Schemas are loose objects: Stripe adds fields over time, and fields we do not read pass through.
 * The fields we decide on are checked strictly: types, and bounded string lengths (ids fit the
 * varchar(255) columns that keep them). Merchant data, only shown, is cut to size or left out.
 *
 * A handled event type is one entry in EVENT_OBJECTS: the event type and the schema of its
 * `data.object`. Any other type needs only a valid envelope; the handler acknowledges and ignores it.
 */

/** Stripe's API versions: `2024-06-20`, `2025-09-30.clover`. Nothing else is ever echoed in a header. */
export const STRIPE_API_VERSION_FORMAT = /^\d{4}-\d{2}-\d{2}(?:\.[a-z]+)?$/;

const MAX_ID = 255;
/** An id Stripe made: letters, digits and underscores (`ic_1Mx…`, `iauth_…`). */
const stripeId = z
  .string()
  .min(1)
  .max(MAX_ID)
  .regex(/^[A-Za-z0-9_]+$/, "Expected a Stripe id (letters, digits, underscores)");

/** Stripe's own limits on metadata: keys up to 40 characters, values up to 500. */
const metadata = z.record(z.string().max(40), z.string().max(500));

/** An Issuing card as an event embeds it: its id, or the card object (its metadata carries our card_id). */
const issuingCardRef = z.union([stripeId, z.looseObject({ id: stripeId, metadata: metadata.optional() })], {
  error: "Expected a card id, or a card object with an id and string metadata",
});

/** A merchant's text as our column holds it: cut to its length; anything but a string is unknown. */
const shown = (max: number) => z.string().transform((t) => t.slice(0, max)).nullish().catch(null);

/**
 * What an authorization or transaction says of the merchant: shown, never decided on, so a field
 * out of shape never refuses an event that moves money (Stripe would give up redelivering it).
 */
const merchantData = z
  .looseObject({
    name: shown(200),
    category: shown(100),
    country: z.string().regex(/^[A-Z]{2}$/).nullish().catch(null),
  })
  .nullish()
  .catch(null);

/** issuing.authorization: amounts in the smallest currency unit, never negative. */
const issuingAuthorization = z.looseObject({
  id: stripeId,
  amount: z.int().nonnegative(),
  approved: z.boolean(),
  status: z.enum(["pending", "closed", "reversed", "expired"]).optional(),
  /** Set on the request event (the amount asked for); null afterwards. */
  pending_request: z.looseObject({ amount: z.int().nonnegative() }).nullish(),
  merchant_data: merchantData,
  card: issuingCardRef,
});

/** issuing.transaction: captures are negative amounts, refunds positive. */
const issuingTransaction = z.looseObject({
  id: stripeId,
  type: z.string().min(1).max(100),
  amount: z.int(),
  card: issuingCardRef,
  /** The authorization it settles: its id, or the object. */
  authorization: z.union([stripeId, z.looseObject({ id: stripeId })]).nullish(),
  merchant_data: merchantData,
});

/** payment_intent: a hold; its metadata names our card. */
const paymentIntent = z.looseObject({ id: stripeId, metadata: metadata.optional() });

/** refund: metadata `request` names the payment it carries out (its idempotency key, `<payment id>:…`). */
const refund = z.looseObject({
  id: stripeId,
  status: z.string().max(32).nullish(),
  failure_reason: z.string().max(100).nullish().catch(null),
  metadata: metadata.optional(),
});

/** The handled event types and the schema of each one's `data.object`. */
export const EVENT_OBJECTS = {
  "issuing_authorization.request": issuingAuthorization,
  "issuing_authorization.created": issuingAuthorization,
  "issuing_authorization.updated": issuingAuthorization,
  "issuing_transaction.created": issuingTransaction,
  "payment_intent.canceled": paymentIntent,
  "refund.failed": refund,
  "refund.updated": refund,
} as const satisfies Record<string, z.ZodType>;

/** The envelope's fields besides `type` and `data`. */
const eventFields = {
  id: z
    .string()
    .max(MAX_ID)
    .regex(/^evt_[A-Za-z0-9_]+$/, "Expected a Stripe event id (evt_…)"),
  livemode: z.boolean(),
  api_version: z.string().max(64).regex(STRIPE_API_VERSION_FORMAT, "Expected a Stripe API version (e.g. 2025-09-30.clover)").nullable(),
  created: z.int(),
};
const eventFieldsSchema = z.object(eventFields);

/** What every event must be, whatever its type. */
export const stripeEventEnvelope = z.looseObject({
  ...eventFields,
  /** Kept in stripe_events.type, a varchar(100). */
  type: z
    .string()
    .min(1)
    .max(100)
    .regex(/^[A-Za-z0-9_.]+$/, "Expected a Stripe event type (e.g. issuing_authorization.created)"),
  data: z.looseObject({ object: z.looseObject({}) }),
});

export type StripeEventEnvelope = z.infer<typeof stripeEventEnvelope>;
export type HandledEventType = keyof typeof EVENT_OBJECTS;
export type EventObject<T extends HandledEventType> = z.infer<(typeof EVENT_OBJECTS)[T]>;
export type IssuingCardRef = z.infer<typeof issuingCardRef>;

/** A handled event: a union discriminated by `type`, so a switch on it types `data.object`. */
export type HandledStripeEvent = {
  [T in HandledEventType]: z.infer<typeof eventFieldsSchema> & {
    [field: string]: unknown;
    type: T;
    data: { [field: string]: unknown; object: EventObject<T> };
  };
}[HandledEventType];

export type ParsedStripeEvent = { handled: true; event: HandledStripeEvent } | { handled: false; event: StripeEventEnvelope };

export interface EventIssue {
  path: string;
  message: string;
}

export type EventParseResult = { success: true; value: ParsedStripeEvent } | { success: false; issues: EventIssue[] };

const MAX_ISSUES = 10;
const MAX_SEGMENT = 64;

/** zod's issues as the project's validation issues; paths are from the input (record keys), so bounded. */
function toIssues(issues: z.ZodError["issues"], prefix: PropertyKey[] = []): EventIssue[] {
  return issues.slice(0, MAX_ISSUES).map((i) => {
    const path = [...prefix, ...i.path].map((s) => String(s).slice(0, MAX_SEGMENT)).join(".");
    return { path: path || "(body)", message: i.message };
  });
}

/** Validates a (signature-verified, JSON-parsed) webhook payload: its envelope, then, for a handled type, its object. */
export function parseStripeEvent(payload: unknown): EventParseResult {
  const envelope = stripeEventEnvelope.safeParse(payload);
  if (!envelope.success) return { success: false, issues: toIssues(envelope.error.issues) };
  const event = envelope.data;
  if (!Object.hasOwn(EVENT_OBJECTS, event.type)) return { success: true, value: { handled: false, event } };
  const object = EVENT_OBJECTS[event.type as HandledEventType].safeParse(event.data.object);
  if (!object.success) return { success: false, issues: toIssues(object.error.issues, ["data", "object"]) };
  return {
    success: true,
    value: { handled: true, event: { ...event, data: { ...event.data, object: object.data } } as HandledStripeEvent },
  };
}

/**
 * The Stripe-Version header of a synchronous answer: the event's API version only if it has Stripe's
 * format (never unvalidated text in a header), else the SDK's.
 */
export function stripeVersionHeader(apiVersion: unknown): string {
  return typeof apiVersion === "string" && apiVersion.length <= 64 && STRIPE_API_VERSION_FORMAT.test(apiVersion) ? apiVersion : Stripe.API_VERSION;
}
