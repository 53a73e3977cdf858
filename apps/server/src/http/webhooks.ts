import { AppError, ProcessorEventLog, refundFailure, type Mode, type Services } from "@cardctl/api";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import Stripe from "stripe";
import type { WebhookSecret } from "../config.js";
import { sendError } from "./errors.js";
import { parseStripeEvent, stripeVersionHeader, type EventIssue, type IssuingCardRef, type ParsedStripeEvent, type StripeEventEnvelope } from "./stripe-events.js";

export const STRIPE_WEBHOOK_PATH = "/v1/webhooks/stripe";

/** `too_early`: the event is about something another event has yet to bring; Stripe redelivers it later. */
type Outcome = "approved" | "declined" | "applied" | "ignored" | "too_early";

/**
 * Stripe webhooks at POST /v1/webhooks/stripe, in an encapsulated plugin with its own body parser:
 * the signature is verified on the raw bytes against each mode's endpoint's secrets (config's
 * WebhookSecret: an event must be of the mode whose secret signed it). No API key (the auth hook
 * skips /v1/webhooks/), no rate limit (a 429 would decline real purchases).
 *
 * - issuing_authorization.request: Stripe's synchronous webhook; answered 200 with `{approved}`
 *   and a Stripe-Version header, within Stripe's 2 s deadline, decided from the database only
 *   (DESIGN 3.6): a repeat of a decided authorization is an increment of it.
 * - issuing_authorization.created / .updated: Stripe's final answer (a decline after we approved
 *   gives the card back) and reversals or expiries of authorizations that will not settle.
 * - issuing_transaction.created: settlement (captures, for any amount) and refunds: money moves here.
 * - payment_intent.canceled: a card's hold lapsed or was canceled: the card is closed at once.
 * - refund.failed / refund.updated (failed or canceled): a refund that did not reach the customer
 *   after all: its payment needs an operator.
 * Events are deduplicated by id in stripe_events, except the request event: its authorization's
 * own unique key (authorizations.processor_authorization_id) already makes a replay, or a duplicate
 * racing it, get the decision recorded the first time, so it skips two writes on the hot path.
 *
 * A signed payload is validated (stripe-events.ts) before anything uses it: a malformed event is
 * 400 invalid_event, whatever its type, the synchronous request event included.
 */
export async function registerStripeWebhooks(app: FastifyInstance, services: Services, webhookSecrets: WebhookSecret[]) {
  const events = new ProcessorEventLog(services.deps.ds);
  await app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser("*", { parseAs: "buffer" }, (_req, body, done) => done(null, body));
    scope.post(STRIPE_WEBHOOK_PATH, { config: { rateLimit: false } }, async (req, reply) => {
      if (webhookSecrets.length === 0)
        return sendError(req, reply, new AppError(503, "processor_not_configured", "Stripe webhooks are not configured: set STRIPE_TEST_WEBHOOK_SECRET / STRIPE_LIVE_WEBHOOK_SECRET."));
      const raw = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
      const signature = req.headers["stripe-signature"];
      const invalidSignature = () =>
        sendError(req, reply, new AppError(400, "invalid_signature", "The Stripe-Signature header does not verify against this payload."));
      if (!signature) return invalidSignature();
      let payload: unknown;
      let signedFor: WebhookSecret["mode"];
      for (const { secret, mode } of webhookSecrets) {
        try {
          payload = Stripe.webhooks.constructEvent(raw, signature, secret);
          signedFor = mode;
          break;
        } catch (err) {
          if (err instanceof Stripe.errors.StripeSignatureVerificationError) continue;
          // Signed, but not JSON (or a thin event notification, which this endpoint does not take).
          return invalidEvent(req, reply, [{ path: "(body)", message: "Expected a JSON Stripe event" }]);
        }
      }
      if (payload === undefined) return invalidSignature();
      // A valid signature is no promise of a well-formed event: validated before anything uses it.
      // For issuing_authorization.request too: a 400 (rather than {approved: false}) makes Stripe
      // apply the card's default decline behaviour to a request event it cannot be told about.
      const parsed = parseStripeEvent(payload);
      if (!parsed.success) return invalidEvent(req, reply, parsed.issues);
      // Signed by one mode's endpoint, an event of the other mode is refused: a test secret moves no live money.
      if (signedFor && modeOf(parsed.value.event) !== signedFor)
        return invalidEvent(req, reply, [{ path: "livemode", message: `must be ${signedFor === "live"} for an event signed with the ${signedFor}-mode endpoint's secret` }]);
      return handle(req, reply, parsed.value);
    });
  });

  async function handle(req: FastifyRequest, reply: FastifyReply, parsed: ParsedStripeEvent) {
    const { event } = parsed;
    if (event.type === "issuing_authorization.request") {
      let approved = false;
      try {
        approved = (await apply(parsed)) === "approved";
      } catch (err) {
        req.log.error({ err, event_id: event.id, event_type: event.type }, "stripe authorization request failed");
      }
      return answerAuthorization(reply, event, approved);
    }
    const claim = await events.claim(event.id, event.type);
    // A seen event whose handling never finished is handled again (the purchase path is idempotent).
    if (claim.kind === "seen" && claim.outcome !== null) return reply.code(200).send({ received: true, duplicate: true });
    let outcome: Outcome;
    try {
      outcome = await apply(parsed);
    } catch (err) {
      await events.release(event.id).catch(() => undefined);
      req.log.error({ err, event_id: event.id, event_type: event.type }, "stripe webhook failed");
      throw err; // 500: Stripe retries later
    }
    if (outcome === "too_early") {
      await events.release(event.id);
      return sendError(req, reply, new AppError(409, "event_too_early", "This event is about something whose own outcome is not recorded yet (an authorization's .created, a refund's answer); redeliver it."));
    }
    await events.complete(event.id, outcome);
    return reply.code(200).send({ received: true, outcome });
  }

  async function apply(parsed: ParsedStripeEvent): Promise<Outcome> {
    if (!parsed.handled) return "ignored";
    const { event } = parsed;
    const mode = modeOf(event);
    const { cards, lifecycle } = services;
    switch (event.type) {
      case "issuing_authorization.request": {
        // The real-time decision, from the database only (Stripe waits at most 2 s).
        const auth = event.data.object;
        // `amount` is what is authorized so far (0 on a first request), `pending_request.amount`
        // what Stripe would hold in addition: an increment asks for their sum in all.
        const amount = auth.amount + (auth.pending_request?.amount ?? 0);
        const card = await cards.findByProcessor(cardRef(mode, auth.card));
        if (!card) return "declined";
        // An authorization already decided comes back from `authorize` as recorded (its unique key
        // stops a second one, the card's use rolled back with it): a repeat, or an increment of it,
        // approved only while its card's hold is still in force (stillApproved).
        const decided = await lifecycle.authorize(card, { amountCents: amount, merchant: auth.merchant_data ?? undefined, processorAuthorizationId: auth.id });
        return (await lifecycle.stillApproved(decided, card, amount)) ? "approved" : "declined";
      }
      case "issuing_authorization.created": {
        // Stripe's final answer. A decline after we approved: nothing will settle, the card is given back.
        const auth = event.data.object;
        let seen = await lifecycle.byProcessorAuthorization(mode, auth.id);
        const recorded = seen !== null;
        if (!seen) {
          // The request event never reached us, or has yet to be decided (Stripe decided alone, past
          // its 2 s): recorded as Stripe decided; a decline recorded first stops a late approval of
          // ours from using the card (its insert meets this record's unique key). A late approval
          // that committed first is the record `authorize` answers with: the decline below ends it.
          const card = await cards.findByProcessor(cardRef(mode, auth.card));
          if (!card) return "ignored";
          seen = await lifecycle.authorize(card, {
            amountCents: auth.amount,
            merchant: auth.merchant_data ?? undefined,
            processorAuthorizationId: auth.id,
            processorDeclined: !auth.approved,
          });
        }
        if (!auth.approved && seen.approved && seen.status === "pending") await lifecycle.release(seen, "declined");
        // Stripe approved what we declined (our answer came too late, or our rules refused what it
        // had already approved): money settles on it, so the card is spent by it.
        else if (auth.approved && !seen.approved) await lifecycle.processorApproved(seen);
        else if (recorded) return "ignored";
        return "applied";
      }
      case "issuing_authorization.updated": {
        const auth = event.data.object;
        const seen = await lifecycle.byProcessorAuthorization(mode, auth.id);
        // Stripe does not promise order: an approved authorization of one of our cards that ended
        // before its .created was handled (not recorded, or recorded as our decline that Stripe's
        // approval overrides) must not be lost, or .created would leave the card USED.
        const ended = auth.status === "reversed" || auth.status === "expired" ? auth.status : null;
        if (ended && auth.approved && !seen?.approved && (seen || (await cards.findByProcessor(cardRef(mode, auth.card))))) return "too_early";
        if (!seen || seen.status !== "pending" || !ended) return "ignored";
        await lifecycle.release(seen, ended);
        return "applied";
      }
      case "issuing_transaction.created": {
        // Money moves only here: a capture settles (for any amount), a refund comes back.
        const tx = event.data.object;
        if (tx.type !== "capture" && tx.type !== "refund") return "ignored";
        const card = await cards.findByProcessor(cardRef(mode, tx.card));
        if (!card) return "ignored";
        const merchantName = tx.merchant_data?.name ?? null;
        // `amount` moves our Issuing balance: negative for a capture, positive for a refund, and
        // the other way for their (rare) reversals. The customer owes its opposite.
        const owed = -tx.amount;
        if (owed < 0) await lifecycle.refund(card, { amountCents: -owed, processorTransactionId: tx.id, merchantName });
        else {
          const authRef = tx.type === "capture" ? (typeof tx.authorization === "string" ? tx.authorization : tx.authorization?.id) : undefined;
          const auth = authRef ? await lifecycle.byProcessorAuthorization(mode, authRef) : null;
          // The capture of an authorization not recorded yet (Stripe does not promise order, and
          // decided alone when we did not answer): settled once its .created is, or that would
          // record it pending after its money settled, holding the card's use for good.
          if (authRef && !auth) return "too_early";
          await lifecycle.settle(card, { amountCents: owed, authorizationId: auth?.id ?? null, processorTransactionId: tx.id, merchantName });
        }
        return "applied";
      }
      case "refund.failed":
      case "refund.updated": {
        // A refund Stripe accepted and then could not deliver (the card closed, say): the customer
        // did not get that money back, so its payment needs an operator. Its metadata `request`
        // is the key it was made under.
        const re = event.data.object;
        const request = re.metadata?.request;
        const failure = refundFailure(re);
        if (!failure || !request) return "ignored";
        return services.payments.refundFailed(mode, request, failure);
      }
      case "payment_intent.canceled": {
        // A hold canceled at Stripe (it lapsed after about 7 days): the card must not take more.
        const pi = event.data.object;
        const card = await cards.findByProcessor({ mode, cardId: pi.metadata?.card_id });
        // Its card still being made (its hold not recorded yet): redelivered once it is, else the
        // card would open on a hold that is gone.
        if (card?.status === "CREATING" && card.hold_id === null) return "too_early";
        if (!card || card.hold_id !== pi.id || card.hold_status !== "OPEN") return "ignored";
        await lifecycle.holdCanceled(card);
        return "applied";
      }
    }
  }
}

/** 400 invalid_event, with the issues like the project's validation errors. */
function invalidEvent(req: FastifyRequest, reply: FastifyReply, issues: EventIssue[]) {
  const message = `Invalid Stripe event: ${issues.map((i) => `${i.path}: ${i.message}`).join("; ")}`;
  req.log.warn({ issues }, "stripe webhook event invalid");
  return sendError(req, reply, new AppError(400, "invalid_event", message, { issues }));
}

function cardRef(mode: Mode, card: IssuingCardRef) {
  return typeof card === "string"
    ? { mode, processorCardId: card }
    : { mode, processorCardId: card.id, cardId: card.metadata?.card_id || undefined };
}

/** Stripe's synchronous webhook contract: 200, Stripe-Version, JSON `{approved}`. */
function answerAuthorization(reply: FastifyReply, event: StripeEventEnvelope, approved: boolean) {
  return reply
    .code(200)
    .header("Stripe-Version", stripeVersionHeader(event.api_version))
    .type("application/json")
    .send({ approved });
}

/** The mode of our account an event is about: a live-mode event moves live money. */
const modeOf = (event: { livemode: boolean }): Mode => (event.livemode ? "live" : "test");
