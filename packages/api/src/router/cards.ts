import { forbidden } from "../domain/errors.js";
import { cardCreatedView, cardDetailView, cardListView } from "../domain/views.js";
import { isoTime } from "../domain/ids.js";
import * as s from "@cardctl/contract";
import { apiProcedure, router } from "../trpc.js";

const tags = ["cards"];

export const cardsRouter = router({
  create: apiProcedure
    .meta({
      openapi: {
        method: "POST",
        path: "/cards",
        tags,
        summary: "Create a virtual card",
        description: "201 with the card when the policy allows it; 202 with an approval request when a human must approve.",
      },
    })
    .input(s.createCardInput)
    .output(s.createCardOutput)
    .mutation(async ({ ctx, input }) => {
      const result = await ctx.services.cards.create(ctx.principal, input, ctx.creationKey);
      if (result.kind === "pending") {
        ctx.response.status = 202;
        return {
          status: "PENDING_APPROVAL" as const,
          approval_id: result.approval.id,
          expires_at: isoTime(result.approval.expires_at),
        };
      }
      ctx.response.status = 201;
      return cardCreatedView(result.card);
    }),

  list: apiProcedure
    .meta({ openapi: { method: "GET", path: "/cards", tags, summary: "List cards, newest first" } })
    .input(s.listCardsInput)
    .output(s.listOf(s.cardListItem))
    .query(async ({ ctx, input }) => {
      // Requests awaiting approval are approvals, not cards: that filter matches no card.
      if (input.status === "PENDING_APPROVAL") return { data: [], has_more: false };
      const page = await ctx.services.cards.list(
        ctx.principal,
        { status: input.status, agent_id: input.agent_id },
        { limit: input.limit, startingAfter: input.starting_after },
      );
      return { data: page.data.map(cardListView), has_more: page.has_more };
    }),

  get: apiProcedure
    .meta({
      openapi: {
        method: "GET",
        path: "/cards/{id}",
        tags,
        summary: "Get a card with an ephemeral key secret to reveal its number client-side",
      },
    })
    .input(s.getCardInput)
    .output(s.cardDetail)
    .query(async ({ ctx, input }) => {
      const { card, ephemeralKeySecret } = await ctx.services.cards.reveal(ctx.principal, input.id, input.nonce);
      return cardDetailView(card, ephemeralKeySecret);
    }),

  close: apiProcedure
    .meta({ openapi: { method: "POST", path: "/cards/{id}/close", tags, summary: "Close a card (idempotent)" } })
    .input(s.cardIdInput)
    .output(s.closeCardOutput)
    .mutation(async ({ ctx, input }) => {
      await ctx.services.cards.close(ctx.principal, input.id);
      return { ok: true as const, status: "CLOSED" as const };
    }),
});

export const testHelpersRouter = router({
  purchase: apiProcedure
    .meta({
      openapi: {
        method: "POST",
        path: "/test_helpers/cards/{id}/purchase",
        tags: ["test helpers"],
        summary: "Simulate a purchase on a card (test keys only)",
      },
    })
    .input(s.purchaseInput)
    .output(s.purchaseOutput)
    .mutation(async ({ ctx, input }) => {
      if (ctx.principal.mode !== "test") throw forbidden("Test helpers work only with sk_test_ keys.");
      const result = await ctx.services.cards.purchase(ctx.principal, input.id, input.amount_cents);
      return { ...result, card: cardListView(result.card) };
    }),
});
