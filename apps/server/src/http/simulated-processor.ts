import { SIMULATED_PROCESSOR_CARDS_PATH, type SimulatedProcessor } from "@cardctl/api";
import type { FastifyInstance } from "fastify";

/**
 * The simulated processor's client endpoint: what Stripe's API is to Issuing Elements. A client
 * reads a card's number and CVC here with the card's ephemeral key (from GET /v1/cards/:id), so the
 * number never passes through /v1 or /trpc. It is the processor's, not ours: no API key, no rate
 * limit, Stripe's error shape, and authorised only by `Authorization: Bearer ek_test_…` of that
 * very card. Headers are never logged (app.ts), and the key never appears in a URL here.
 */
export function registerSimulatedProcessor(app: FastifyInstance, simulated: SimulatedProcessor) {
  const unauthorized = { error: { type: "invalid_request_error", message: "Invalid or expired ephemeral key for this card." } };
  app.get<{ Params: { id: string } }>(
    `${SIMULATED_PROCESSOR_CARDS_PATH}/:id`,
    { config: { rateLimit: false } },
    async (req, reply) => {
      req.processorErrorShape = true;
      reply.header("cache-control", "no-store");
      const match = /^Bearer (ek_test_[A-Za-z0-9_-]+)$/.exec(req.headers.authorization ?? "");
      const card = match ? await simulated.retrieveCardWithKey(match[1]!, req.params.id) : null;
      if (!card) return reply.code(401).send(unauthorized);
      return card;
    },
  );
}
