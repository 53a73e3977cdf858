import { z } from "zod";
import { EVENT_TYPES } from "./event-types.js";

/** Every schema of the REST contract (spec section 2), shared by both transports and the SDK. */

/**
 * A body field taken exactly as sent. trpc-to-openapi coerces every number and boolean of an input
 * object (so "false" would become true); a pipe is opaque to that, and JSON types stay strict.
 */
export const exact = <T extends z.ZodType>(schema: T) => schema.pipe(z.custom<z.output<T>>(() => true));

/**
 * An amount in cents, min..max. Every way it can be wrong (missing, not a number, fractional, out of
 * range) gets the one sentence that says what is expected; the API puts the field name before it.
 */
const centsIn = (min: number, max: number, expected = `an integer number of cents from ${min} to ${max}`) => {
  const error = (issue: { input?: unknown }) => (issue.input === undefined ? `is required: ${expected}` : `must be ${expected}`);
  return exact(z.number({ error }).int({ error }).min(min, { error }).max(max, { error }));
};
const cents = centsIn(1, 50000);
/** An override's maximum: any amount, since one above the default's is ignored (the smaller applies), never refused. */
const overrideMax = centsIn(0, Number.MAX_SAFE_INTEGER, "an integer number of cents, 0 or more");
const flag = exact(z.boolean());
const timestamp = z.string().describe("ISO 8601 UTC timestamp");
export const cardStatus = z.enum(["OPEN", "USED", "CLOSED"]);
export const cardStatusFilter = z.enum(["OPEN", "USED", "CLOSED", "PENDING_APPROVAL"]);
export const approvalStatus = z.enum(["PENDING", "APPROVED", "REJECTED", "EXPIRED"]);
const id = (prefix: string) => z.string().min(1).max(64).describe(`${prefix}… identifier`);

export const createCardInput = z.strictObject({
  amount_cents: cents.describe("Spending limit in cents, 1..50000"),
  agent_id: z.string().min(1).max(255).optional().describe("Identifier of the calling agent"),
  purpose: z.string().max(500).optional(),
  policy_override: z
    .strictObject({
      approval_required: flag.optional(),
      max_amount_cents: overrideMax.optional(),
    })
    .optional()
    .describe("Can only tighten the default policy: the smaller maximum applies, so one above the default's has no effect"),
});

export const cardCreated = z.object({
  id: z.string(),
  status: cardStatus,
  last_four: z.string(),
  expiration: z.string().describe("MM/YY"),
  spending_limit_cents: z.number().int(),
  remaining_cents: z.number().int(),
  agent_id: z.string().nullable(),
  created_at: timestamp,
  expires_at: timestamp.describe("When the card closes if unused (CARD_TTL_SECONDS after issue)"),
  spent_cents: z.number().int().describe("Settled minus refunded"),
});

export const pendingApproval = z.object({
  status: z.literal("PENDING_APPROVAL"),
  approval_id: z.string(),
  expires_at: timestamp,
});

export const createCardOutput = z.union([cardCreated, pendingApproval]);

const page = {
  limit: z.coerce.number().int().min(1).max(100).default(20).describe("Page size, 1..100 (default 20)"),
  starting_after: z.string().min(1).max(64).optional().describe("Cursor: the last id of the previous page"),
};

export const listCardsInput = z.object({
  status: cardStatusFilter.optional(),
  agent_id: z.string().min(1).max(255).optional(),
  ...page,
});

export const cardListItem = z.object({
  id: z.string(),
  status: cardStatus,
  last_four: z.string(),
  expiration: z.string(),
  amount_cents: z.number().int(),
  remaining_cents: z.number().int(),
  agent_id: z.string().nullable(),
  purpose: z.string().nullable(),
  created_at: timestamp,
  expires_at: timestamp,
  spent_cents: z.number().int(),
});

export const listOf = <T extends z.ZodType>(item: T) => z.object({ data: z.array(item), has_more: z.boolean() });

export const cardIdInput = z.object({ id: id("card_") });
export const getCardInput = z.object({
  id: id("card_"),
  nonce: z.string().min(1).max(500).optional().describe("Passed through to the processor's ephemeral key (Issuing Elements)"),
});

export const cardDetail = cardListItem.extend({
  closed_at: timestamp.nullable(),
  processor_card_id: z.string(),
  ephemeral_key_secret: z.string().describe("Short-lived secret for the processor's client-side reveal of PAN and CVV"),
  reveal: z
    .object({
      url: z
        .string()
        .describe("The processor's card endpoint: an absolute URL (Stripe), or a path on this service (the simulated processor, /simulated-processor/v1/issuing/cards/…)"),
      api_version: z.string().nullable().describe("Stripe-Version header to send with the ephemeral key (2020-03-02 on Stripe); null when none is needed"),
    })
    .describe(
      "Where the client reads number and CVC itself: GET url?expand[]=number&expand[]=cvc with Authorization: Bearer <ephemeral_key_secret> (and Stripe-Version: api_version when set). The number never passes through this API.",
    ),
});

export const closeCardOutput = z.object({ ok: z.literal(true), status: z.literal("CLOSED") });

export const balance = z.object({
  held_cents: z.number().int(),
  open_cards: z.number().int(),
  pending_approvals: z.number().int(),
  max_per_card_cents: z.number().int(),
  approval_required: z.boolean(),
  setup_complete: z.boolean(),
  uncollected_cents: z.number().int().describe("Money spent beyond cards' holds that the payment method refused, less what refunds waived of it"),
});

export const policy = z.object({ approval_required: z.boolean(), max_amount_cents: z.number().int() });
export const updatePolicyInput = z.strictObject({
  approval_required: flag.optional(),
  max_amount_cents: cents.optional(),
});

/** POST /v1/policies/check: the fields of a card request that the decision depends on. */
export const policyCheckInput = createCardInput.pick({ amount_cents: true, agent_id: true, policy_override: true });

export const policyCheckDecision = z.enum(["issue", "approval_required", "denied"]);

/** One finding of a policy check; `details` are those of the matching 403 of POST /v1/cards. */
export const policyCheckReason = z.discriminatedUnion("code", [
  z.object({
    code: z.literal("setup_required"),
    message: z.string(),
    details: z.object({
      missing: z.array(z.enum(["kyb", "payment_method", "cardholder"])),
      setup_url: z.string().describe("Where the owner finishes set-up"),
    }),
  }),
  z.object({
    code: z.literal("amount_over_max"),
    message: z.string(),
    details: z.object({ max_amount_cents: z.number().int(), requested: z.number().int() }),
  }),
  z.object({
    code: z.literal("approval_required"),
    message: z.string(),
    details: z.object({
      source: z.enum(["policy", "policy_override"]).describe("The default policy requires approval, or the request's override asks for it"),
    }),
  }),
]);

export const policyCheck = z.object({
  decision: policyCheckDecision.describe("What POST /v1/cards with this request would do now: 201 issue, 202 approval_required, 403 denied"),
  reasons: z.array(policyCheckReason).describe("Every check that applies, in the order of checks: setup_required, amount_over_max, approval_required"),
  effective_policy: policy,
});

export const listApprovalsInput = z.object({ status: approvalStatus.default("PENDING"), ...page });
export const approval = z.object({
  id: z.string(),
  amount_cents: z.number().int(),
  agent_id: z.string().nullable(),
  purpose: z.string().nullable(),
  status: approvalStatus,
  reason: z.string().nullable(),
  card_id: z.string().nullable(),
  expires_at: timestamp,
  created_at: timestamp,
});
export const approvalIdInput = z.strictObject({ id: id("appr_") });
export const rejectInput = z.strictObject({ id: id("appr_"), reason: z.string().max(500).optional() });
export const rejectOutput = z.object({ ok: z.literal(true), status: z.literal("REJECTED") });

export const purchaseInput = z.strictObject({
  id: id("card_"),
  amount_cents: cents,
  merchant: z.string().max(200).optional(),
});
export const purchaseOutput = z.object({
  approved: z.boolean(),
  decline_reason: z.string().nullable(),
  amount_cents: z.number().int(),
  card: cardListItem,
});

// The card money lifecycle (DESIGN 3.6, 3.10)
const amountOrZero = centsIn(0, 50000);
export const merchant = z.strictObject({
  name: z.string().min(1).max(200).optional(),
  category: z.string().min(1).max(100).optional(),
  country: z.string().regex(/^[A-Z]{2}$/, "must be an ISO 3166-1 alpha-2 country code in capitals, e.g. US").optional(),
});
export const authorizationStatus = z.enum(["pending", "closed", "reversed", "expired"]);
export const authorization = z.object({
  id: z.string(),
  card_id: z.string(),
  amount_cents: z.number().int(),
  approved: z.boolean(),
  decline_reason: z.string().nullable(),
  status: authorizationStatus,
  merchant: z.object({ name: z.string().nullable(), category: z.string().nullable(), country: z.string().nullable() }),
  created_at: timestamp,
});
export const transaction = z.object({
  id: z.string(),
  card_id: z.string(),
  authorization_id: z.string().nullable(),
  type: z.enum(["capture", "refund"]),
  amount_cents: z.number().int().describe("Settled (capture) or returned (refund), always positive"),
  merchant_name: z.string().nullable(),
  created_at: timestamp,
});
export const listByCardInput = z.object({ card_id: id("card_").optional(), ...page });
export const testAuthorizeInput = z.strictObject({
  id: id("card_"),
  amount_cents: amountOrZero.describe("0 is a card verification"),
  merchant: merchant.optional(),
});
export const authorizationIdInput = z.strictObject({ id: id("auth_") });
export const testCaptureInput = z.strictObject({ id: id("auth_"), amount_cents: cents.optional().describe("Defaults to the authorized amount; may be more (tips) or less") });
export const testRefundInput = z.strictObject({ id: id("txn_"), amount_cents: cents.optional().describe("Defaults to the whole transaction") });

// Events (DESIGN 3.7)
export { EVENT_TYPES };
export const eventType = z.enum(EVENT_TYPES);
export type EventType = z.infer<typeof eventType>;
export const event = z
  .object({
    id: z.string().describe("evt_…"),
    object: z.literal("event"),
    type: eventType,
    created_at: timestamp,
    mode: z.enum(["test", "live"]),
    actor: z
      .object({
        type: z.enum(["api_key", "owner", "processor", "system"]),
        id: z.string().nullable().describe("The API key (key_…) or owner (own_…); null for the processor and the system"),
      })
      .describe("Who caused the change"),
    data: z.object({ object: z.record(z.string(), z.unknown()).describe("The resource as the API shows it, after the change") }),
  })
  .meta({ id: "Event", description: "A state change of the account, kept 30 days" });
export const listEventsInput = z.object({ type: eventType.optional().describe("Only events of this type"), ...page });
export const eventIdInput = z.object({ id: id("evt_") });

// Outgoing webhooks (DESIGN 3.7)
/** At most this many webhook endpoints per account and mode. */
export const MAX_WEBHOOK_ENDPOINTS = 16;
export const webhookEndpointStatus = z.enum(["enabled", "disabled"]);
/** The longest webhook URL, as given and once written out in full (percent-encoded). */
export const MAX_WEBHOOK_URL_LENGTH = 2048;
const webhookUrl = z.string().min(1).max(MAX_WEBHOOK_URL_LENGTH).describe("Where events are POSTed: https://… (http:// only when the server sets WEBHOOK_ALLOW_PRIVATE)");
const webhookEvents = z
  .array(z.enum(["*", ...EVENT_TYPES]))
  .min(1)
  .max(EVENT_TYPES.length + 1)
  .describe('The event types to send, or ["*"] for all');
export const createWebhookEndpointInput = z.strictObject({ url: webhookUrl, events: webhookEvents, description: z.string().max(500).optional() });
export const updateWebhookEndpointInput = z.strictObject({
  id: id("we_"),
  url: webhookUrl.optional(),
  events: webhookEvents.optional(),
  description: z.string().max(500).nullable().optional().describe("null removes it"),
  status: webhookEndpointStatus
    .optional()
    .describe("disabled: nothing more is sent to it and its pending deliveries fail; enabled: it receives the events that happen from now on"),
});
/** The longest a rotated-out signing secret keeps signing deliveries beside the new one (7 days). */
export const MAX_PREVIOUS_SECRET_SECONDS = 7 * 24 * 3600;
export const rotateWebhookSecretInput = z.strictObject({
  id: id("we_"),
  expire_previous_in_seconds: z
    .number()
    .int()
    .min(0)
    .max(MAX_PREVIOUS_SECRET_SECONDS)
    .optional()
    .describe("How long deliveries stay signed with the previous secret too, so receivers can switch without missing one: default 86,400 (24 hours); 0 ends it now"),
});
export const webhookEndpoint = z
  .object({
    id: z.string().describe("we_…"),
    url: z.string(),
    events: z.array(z.string()).describe('Event types sent to it; ["*"]: all'),
    description: z.string().nullable(),
    status: webhookEndpointStatus.describe(
      "disabled: by its owner, or because a delivery kept failing for the whole retry schedule; nothing is sent to it until it is enabled again (or a delivery is retried)",
    ),
    mode: z.enum(["test", "live"]).describe("It receives the events of this mode only"),
    previous_secret_expires_at: timestamp
      .nullable()
      .describe("After a secret rotation: until then deliveries carry a signature with the previous secret too (webhook-signature holds both); null when none does"),
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: "WebhookEndpoint", description: "Where the account's events are delivered, signed (Standard Webhooks)" });
export const createdWebhookEndpoint = webhookEndpoint
  .extend({ secret: z.string().describe("whsec_…: the signing secret, shown this once; verify deliveries with it") })
  .meta({ id: "CreatedWebhookEndpoint", description: "A webhook endpoint with its new signing secret (shown this once: at creation, or after a rotation)" });
export const webhookEndpointIdInput = z.object({ id: id("we_") });
export const deletedWebhookEndpoint = z.object({ id: z.string(), deleted: z.literal(true) });
export const listWebhookEndpointsInput = z.object({ ...page });
export const webhookDeliveryStatus = z.enum(["pending", "succeeded", "failed"]);
export const webhookDelivery = z
  .object({
    id: z.string().describe("whd_…"),
    endpoint_id: z.string(),
    event_id: z.string(),
    event_type: z.string(),
    status: webhookDeliveryStatus.describe("pending: not yet delivered (retrying); succeeded: a 2xx answer; failed: the retry schedule ended, or the endpoint was disabled"),
    attempts: z.number().int(),
    last_response_status: z.number().int().nullable().describe("HTTP status of the last attempt; null when it got no answer"),
    last_error: z.string().nullable(),
    next_attempt_at: timestamp.nullable().describe("When the next attempt is due; null when none is"),
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: "WebhookDelivery", description: "One event's delivery to one endpoint" });
export const listWebhookDeliveriesInput = z.object({ id: id("we_"), status: webhookDeliveryStatus.optional(), ...page });
export const retryWebhookDeliveryInput = z.strictObject({ id: id("we_"), delivery_id: id("whd_") });

export const errorEnvelopeSchema = z
  .object({
    error: z.object({
      code: z.string().describe("Machine-readable code"),
      message: z.string(),
      details: z.record(z.string(), z.unknown()).optional(),
      request_id: z.string().describe("req_…"),
    }),
  })
  // The OpenAPI document's one error component (components/schemas/Error).
  .meta({ id: "Error", description: "The error envelope of every failure: {error: {code, message, details?, request_id}}" });

// Operator API (DESIGN 3.3)
export const mode = z.enum(["test", "live"]);
export const role = z.enum(["full", "agent"]);
// Owners and the dashboard (DESIGN 3.9)
export const ownerEmail = z.string().trim().max(254).email("must be an email address");
export const ownerPassword = z.string().min(10, "must have at least 10 characters").max(200, "must have at most 200 characters");
export const ownerInvite = z.object({
  id: z.string().describe("The owner (own_…)"),
  account_id: z.string(),
  email: z.string(),
  invite_url: z.string().describe("One-time link (valid 24 h) where the owner sets a password; the token is in the fragment, which browsers never send to a server"),
  invite_expires_at: timestamp,
});
export const signInInput = z.strictObject({ email: ownerEmail, password: z.string().min(1).max(200) });
export const acceptInviteInput = z.strictObject({ token: z.string().regex(/^inv_[A-Za-z0-9]{20,80}$/, "must be the invite link's token (inv_…)"), password: ownerPassword });
/** The dashboard's API keys page: a key of the session's mode, made by the owner. */
export const ownerCreateKeyInput = z.strictObject({ role, name: z.string().trim().min(1).max(200).optional() });
export const keyIdInput = z.strictObject({ id: id("key_") });
/** The dashboard's API keys page: the account's keys of both modes, a page at a time (no input: the first 20). */
export const listOwnerKeysInput = z.object({ ...page }).optional();
export const ownerSession = z.object({
  owner: z.object({ id: z.string(), email: z.string(), account_id: z.string(), session_expires_at: timestamp }),
  csrf_token: z.string().describe("Send as the X-CSRF-Token header with every state-changing request of this session"),
});

/** GET /v1/api_keys/current: the key making the request (tools such as the MCP server pick their tool set by its role). */
export const currentKey = z.object({
  id: z.string(),
  account_id: z.string(),
  mode,
  role: role.describe("full: every call; agent: no approving, rejecting or loosening the policy"),
});

/** The officially assigned ISO 3166-1 alpha-2 codes. */
const ISO_COUNTRIES = new Set(
  ("AD AE AF AG AI AL AM AO AQ AR AS AT AU AW AX AZ BA BB BD BE BF BG BH BI BJ BL BM BN BO BQ BR BS BT BV BW BY BZ " +
    "CA CC CD CF CG CH CI CK CL CM CN CO CR CU CV CW CX CY CZ DE DJ DK DM DO DZ EC EE EG EH ER ES ET FI FJ FK FM FO FR " +
    "GA GB GD GE GF GG GH GI GL GM GN GP GQ GR GS GT GU GW GY HK HM HN HR HT HU ID IE IL IM IN IO IQ IR IS IT JE JM JO JP " +
    "KE KG KH KI KM KN KP KR KW KY KZ LA LB LC LI LK LR LS LT LU LV LY MA MC MD ME MF MG MH MK ML MM MN MO MP MQ MR MS MT " +
    "MU MV MW MX MY MZ NA NC NE NF NG NI NL NO NP NR NU NZ OM PA PE PF PG PH PK PL PM PN PR PS PT PW PY QA RE RO RS RU RW " +
    "SA SB SC SD SE SG SH SI SJ SK SL SM SN SO SR SS ST SV SX SY SZ TC TD TF TG TH TJ TK TL TM TN TO TR TT TV TW TZ UA UG " +
    "UM US UY UZ VA VC VE VG VI VN VU WF WS YE YT ZA ZM ZW").split(" "),
);
const text = (max: number) => z.string().trim().min(1).max(max);
/** Latin letters (accents allowed), spaces and . , ' - : what Stripe accepts in a cardholder's (printed) name. */
const LATIN_LETTER = "A-Za-z\\u00C0-\\u00D6\\u00D8-\\u00F6\\u00F8-\\u024F";
const CARDHOLDER_NAME = new RegExp(`^[${LATIN_LETTER}](?:[${LATIN_LETTER} .,'-]*[${LATIN_LETTER}.])?$`);
export const cardholderType = z.enum(["company", "individual"]);

/**
 * Body of POST /admin/v1/accounts/:id/cardholder: who the account's cards are issued to (the
 * Stripe Issuing cardholder). Stripe prints the name on cards: at most 24 characters, no digits.
 * Individuals need a first and a last name; only companies have a tax id (Stripe's company.tax_id).
 */
export const cardholderFields = {
  type: cardholderType,
  name: z
    .string()
    .trim()
    .min(1)
    .max(24)
    .regex(CARDHOLDER_NAME, "must be letters, spaces and . , ' - only (no digits); Stripe prints it on cards")
    .describe("Printed on cards: at most 24 characters, letters, spaces and . , ' -; an individual's is 'First Last'"),
  email: z.email().max(254).optional(),
  phone_number: z
    .string()
    .trim()
    .regex(/^\+?[0-9][0-9 ().-]{5,24}$/, "must be a phone number, e.g. +14155550123")
    .optional(),
  billing: z.strictObject({
    line1: text(200),
    line2: text(200).optional(),
    city: text(100),
    state: text(100).optional().describe("State, county, province or region (ISO 3166-2 code where there is one, e.g. CA)"),
    postal_code: z.string().trim().min(1).max(20).regex(/^[A-Za-z0-9][A-Za-z0-9 -]*$/, "must be letters, digits, spaces and -"),
    country: z
      .string()
      .refine((c) => ISO_COUNTRIES.has(c), "must be an ISO 3166-1 alpha-2 country code in capitals, e.g. US")
      .describe("ISO 3166-1 alpha-2, uppercase"),
  }),
  tax_id: z
    .string()
    .trim()
    .min(5)
    .max(64)
    .regex(/^[A-Za-z0-9][A-Za-z0-9 ./-]*$/, "must be letters, digits, spaces and . / -")
    .optional()
    .describe("Companies only: the business id number; never shown again in full (tax_id_last4)"),
};

/** The rules across fields of a cardholder; for `superRefine` on an object holding `cardholderFields`. */
export function cardholderRules(v: { type: string; name: string; tax_id?: string | undefined }, ctx: z.RefinementCtx): void {
  if (v.type === "individual" && !/\S\s+\S/.test(v.name))
    ctx.addIssue({ code: "custom", path: ["name"], message: "an individual's name needs a first and a last name ('First Last')" });
  if (v.type === "individual" && v.tax_id !== undefined)
    ctx.addIssue({ code: "custom", path: ["tax_id"], message: "only a company cardholder has a tax id" });
}

export const cardholderInput = z.strictObject(cardholderFields).superRefine(cardholderRules);

/** The cardholder as the operator API shows it: the tax id only by its last 4 characters. */
export const cardholder = z.object({
  type: cardholderType,
  name: z.string(),
  email: z.string().nullable(),
  phone_number: z.string().nullable(),
  billing: z.object({
    line1: z.string(),
    line2: z.string().nullable(),
    city: z.string(),
    state: z.string().nullable(),
    postal_code: z.string(),
    country: z.string(),
  }),
  tax_id_last4: z.string().nullable().describe("Last 4 characters of the tax id (separators removed); the full id is never shown"),
  updated_at: timestamp,
});

export const account = z.object({
  id: z.string(),
  name: z.string(),
  kyb_verified: z.boolean(),
  payment_method: z.string().nullable(),
  cardholder: cardholder.nullable().describe("Who cards are issued to; required before Stripe card creation"),
  created_at: timestamp,
});
export const apiKey = z.object({
  id: z.string(),
  mode,
  role,
  name: z.string().nullable(),
  prefix: z.string(),
  last4: z.string(),
  created_at: timestamp,
  revoked_at: timestamp.nullable(),
});
export const createdKey = z.object({
  id: z.string(),
  secret: z.string().describe("Shown this once"),
  mode,
  role,
  name: z.string().nullable(),
  created_at: timestamp,
});

/** Payments an operator follows up (GET /admin/v1/payments): declined charges and repeated failures. */
export const paymentProblemStatus = z.enum(["uncollected", "attention"]);
export const listPaymentProblemsInput = z.object({
  status: paymentProblemStatus.optional().describe("Both when unset"),
  account_id: z.string().min(1).max(64).optional(),
});
export const operatorPayment = z.object({
  id: z.string(),
  account_id: z.string(),
  mode,
  card_id: z.string(),
  transaction_id: z.string(),
  kind: z.enum(["hold_capture", "charge", "refund"]),
  amount_cents: z.number().int(),
  status: paymentProblemStatus,
  waived_cents: z.number().int().describe("Of an uncollected charge, what refunds of its card have waived since: amount_cents − waived_cents is still owed"),
  attempts: z.number().int(),
  last_error: z.string().nullable(),
  created_at: timestamp,
  updated_at: timestamp,
});

/** Cards whose processor follow-up (revoke, hold release) kept failing (GET /admin/v1/cards/attention). */
export const listCardsAttentionInput = z.object({ account_id: z.string().min(1).max(64).optional() });
export const attentionCard = z.object({
  id: z.string(),
  account_id: z.string(),
  mode,
  status: z
    .enum(["CREATING", "USED", "CLOSED", "FAILED"])
    .describe(
      "FAILED: a card whose creation failed and was undone; only its hold is left to release. CREATING: a creation the recovery pass could not finish (its mode's processor is not configured any more, say)",
    ),
  hold_status: z.enum(["NONE", "PENDING", "OPEN", "CAPTURED", "RELEASED", "EXPIRED"]),
  recovery_attempts: z.number().int().describe("Failed attempts of the recovery pass"),
  recovery_error: z.string().nullable().describe("The last attempt's error"),
  created_at: timestamp,
  closed_at: timestamp.nullable(),
});

/** Endpoints without parameters (trpc-to-openapi needs an object input). */
export const noInput = z.object({}).optional();
