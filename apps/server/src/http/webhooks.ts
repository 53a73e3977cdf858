import { AppError, ProcessorEventLog, type Mode, type Services } from "@cardctl/api";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import Stripe from "stripe";
import { sendError } from "./errors.js";

export const STRIPE_WEBHOOK_PATH = "/v1/webhooks/stripe";

type Outcome = "approved" | "declined" | "applied" | "ignored";

/**
 * Stripe webhooks at POST /v1/webhooks/stripe, in an encapsulated plugin with its own body parser:
 * the signature (STRIPE_WEBHOOK_SECRET) is verified on the raw bytes. No API key (the auth hook
 * skips /v1/webhooks/), no rate limit (a 429 would decline real purchases).
 *
 * - issuing_authorization.request: Stripe's synchronous webhook; answered 200 with
 *   `{approved}` and a Stripe-Version header, within Stripe's 2 s deadline: only the database
 *   decides (card OPEN, amount within remaining_cents, first purchase wins); the capture of the hold
 *   and the deactivation of the card run after the answer.
 * - issuing_authorization.created (approved) and issuing_transaction.created (capture): the same
 *   purchase path, for when the request event did not come (or came later; order is not assumed).
 * Events are deduplicated by id; a replayed request event gets the decision it got the first time.
 */
export async function registerStripeWebhooks(app: FastifyInstance, services: Services, webhookSecret: string | undefined) {
  const events = new ProcessorEventLog(services.deps.ds);
  await app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser("*", { parseAs: "buffer" }, (_req, body, done) => done(null, body));
    scope.post(STRIPE_WEBHOOK_PATH, { config: { rateLimit: false } }, async (req, reply) => {
      if (!webhookSecret)
        return sendError(req, reply, new AppError(503, "processor_not_configured", "Stripe webhooks are not configured: set STRIPE_WEBHOOK_SECRET."));
      const raw = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
      const signature = req.headers["stripe-signature"];
      let event: Stripe.Event;
      try {
        if (!signature) throw new Error("missing");
        event = Stripe.webhooks.constructEvent(raw, signature, webhookSecret);
      } catch {
        return sendError(req, reply, new AppError(400, "invalid_signature", "The Stripe-Signature header does not verify against this payload."));
      }
      return handle(req, reply, event);
    });
  });

  async function handle(req: FastifyRequest, reply: FastifyReply, event: Stripe.Event) {
    const synchronous = event.type === "issuing_authorization.request";
    const claim = await events.claim(event.id, event.type);
    if (claim.kind === "seen") {
      let outcome = claim.outcome;
      // A duplicate of a request event still being decided: wait briefly for that decision.
      for (let i = 0; synchronous && outcome === null && i < 10; i++) {
        await new Promise((r) => setTimeout(r, 100));
        outcome = await events.outcome(event.id);
      }
      if (synchronous) return answerAuthorization(reply, event, outcome === "approved");
      // A seen event whose handling never finished is handled again (the purchase path is idempotent).
      if (outcome !== null) return reply.code(200).send({ received: true, duplicate: true });
    }
    let outcome: Outcome;
    try {
      outcome = await apply(event);
    } catch (err) {
      await events.release(event.id).catch(() => undefined);
      req.log.error({ err, event_id: event.id, event_type: event.type }, "stripe webhook failed");
      if (synchronous) return answerAuthorization(reply, event, false);
      throw err; // 500: Stripe retries later
    }
    await events.complete(event.id, outcome);
    if (synchronous) return answerAuthorization(reply, event, outcome === "approved");
    return reply.code(200).send({ received: true, outcome });
  }

  async function apply(event: Stripe.Event): Promise<Outcome> {
    const mode: Mode = event.livemode ? "live" : "test";
    switch (event.type) {
      case "issuing_authorization.request": {
        const auth = event.data.object;
        const amount = auth.pending_request?.amount ?? auth.amount;
        const result = await services.cards.purchaseFromProcessor(cardRef(mode, auth.card), amount, "later");
        return result?.approved ? "approved" : "declined";
      }
      case "issuing_authorization.created": {
        const auth = event.data.object;
        if (!auth.approved) return "ignored";
        const result = await services.cards.purchaseFromProcessor(cardRef(mode, auth.card), auth.amount, "now");
        return result?.approved ? "applied" : "ignored";
      }
      case "issuing_transaction.created": {
        const tx = event.data.object;
        if (tx.type !== "capture") return "ignored";
        const result = await services.cards.purchaseFromProcessor(cardRef(mode, tx.card), Math.abs(tx.amount), "now");
        return result?.approved ? "applied" : "ignored";
      }
      default:
        return "ignored";
    }
  }
}

function cardRef(mode: Mode, card: string | Stripe.Issuing.Card) {
  return typeof card === "string"
    ? { mode, processorCardId: card }
    : { mode, processorCardId: card.id, cardId: card.metadata?.card_id || undefined };
}

/** Stripe's synchronous webhook contract: 200, Stripe-Version, JSON `{approved}`. */
function answerAuthorization(reply: FastifyReply, event: Stripe.Event, approved: boolean) {
  return reply
    .code(200)
    .header("Stripe-Version", event.api_version ?? Stripe.API_VERSION)
    .type("application/json")
    .send({ approved });
}
