import { z } from "zod";

/** Every schema of the REST contract (spec section 2), shared by both transports and the SDK. */

/**
 * A body field taken exactly as sent. trpc-to-openapi coerces every number and boolean of an input
 * object (so "false" would become true); a pipe is opaque to that, and JSON types stay strict.
 */
export const exact = <T extends z.ZodType>(schema: T) => schema.pipe(z.custom<z.output<T>>(() => true));

const cents = exact(z.number().int().min(1).max(50000));
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
      max_amount_cents: cents.optional(),
    })
    .optional()
    .describe("Can only tighten the default policy"),
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
});

export const closeCardOutput = z.object({ ok: z.literal(true), status: z.literal("CLOSED") });

export const balance = z.object({
  held_cents: z.number().int(),
  open_cards: z.number().int(),
  pending_approvals: z.number().int(),
  max_per_card_cents: z.number().int(),
  approval_required: z.boolean(),
  setup_complete: z.boolean(),
});

export const policy = z.object({ approval_required: z.boolean(), max_amount_cents: z.number().int() });
export const updatePolicyInput = z.strictObject({
  approval_required: flag.optional(),
  max_amount_cents: cents.optional(),
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

export const errorEnvelopeSchema = z
  .object({
    error: z.object({
      code: z.string().describe("Machine-readable code"),
      message: z.string(),
      details: z.record(z.string(), z.unknown()).optional(),
      request_id: z.string().describe("req_…"),
    }),
  })
  .meta({ id: "ErrorEnvelope" });

// Operator API (DESIGN 3.3)
export const mode = z.enum(["test", "live"]);
export const role = z.enum(["full", "agent"]);
export const account = z.object({
  id: z.string(),
  name: z.string(),
  kyb_verified: z.boolean(),
  payment_method: z.string().nullable(),
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

/** Endpoints without parameters (trpc-to-openapi needs an object input). */
export const noInput = z.object({}).optional();
