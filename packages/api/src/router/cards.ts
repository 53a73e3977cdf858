import { AppError, forbidden } from "../domain/errors.js";
import { authorizationView, cardCreatedView, cardDetailView, cardListView, transactionView } from "../domain/views.js";
import { isoTime } from "../domain/ids.js";
import { requestTransactionId } from "../domain/lifecycle.js";
import * as s from "@cardctl/contract";
import type { Principal } from "../domain/deps.js";
import type { Page, PageQuery } from "../domain/paging.js";
import { apiProcedure, router, type Context } from "../trpc.js";
import type { z } from "zod";

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
      const result = await ctx.services.cards.create(ctx.principal, input, ctx.creationKey, ctx.creationRetry);
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
      const { card, ephemeralKeySecret, revealEndpoint } = await ctx.services.cards.reveal(ctx.principal, input.id, input.nonce);
      return cardDetailView(card, ephemeralKeySecret, revealEndpoint);
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

const testTags = ["test helpers"];

/** Test helpers work with test keys only: they stand for the card network (DESIGN 3.10). */
const testMode = (mode: string) => {
  if (mode !== "test") throw forbidden("Test helpers work only with sk_test_ keys.");
};

export const testHelpersRouter = router({
  purchase: apiProcedure
    .meta({
      openapi: {
        method: "POST",
        path: "/test_helpers/cards/{id}/purchase",
        tags: testTags,
        summary: "Simulate a purchase on a card: an authorization and its settlement (test keys only)",
      },
    })
    .input(s.purchaseInput)
    .output(s.purchaseOutput)
    .mutation(async ({ ctx, input }) => {
      testMode(ctx.principal.mode);
      const result = await ctx.services.lifecycle.purchase(ctx.principal, input.id, input.amount_cents, input.merchant, ctx.creationKey);
      return { ...result, card: cardListView(result.card) };
    }),

  authorize: apiProcedure
    .meta({ openapi: { method: "POST", path: "/test_helpers/cards/{id}/authorizations", tags: testTags, summary: "A merchant asks to charge the card" } })
    .input(s.testAuthorizeInput)
    .output(s.authorization)
    .mutation(async ({ ctx, input }) => {
      testMode(ctx.principal.mode);
      const card = await ctx.services.cards.find(ctx.principal, input.id);
      return authorizationView(await ctx.services.lifecycle.authorize(card, { amountCents: input.amount_cents, merchant: input.merchant, usedKey: ctx.creationKey }));
    }),

  capture: apiProcedure
    .meta({ openapi: { method: "POST", path: "/test_helpers/authorizations/{id}/capture", tags: testTags, summary: "Settle an authorization: a capture transaction" } })
    .input(s.testCaptureInput)
    .output(s.transaction)
    .mutation(async ({ ctx, input }) => {
      testMode(ctx.principal.mode);
      const auth = await ctx.services.lifecycle.findAuthorization(ctx.principal, input.id);
      if (!auth.approved) throw new AppError(409, "authorization_not_approved", "A declined authorization cannot be captured.");
      if (auth.amount_cents === 0) throw new AppError(409, "authorization_not_capturable", "A card verification (an authorization of 0) cannot be captured.", { status: auth.status });
      const card = await ctx.services.cards.find(ctx.principal, auth.card_id);
      ctx.response.status = 201;
      // A reversed or expired one gave its card back (it may be OPEN again): there is nothing to
      // settle; checked in the settlement itself, so a reversal at the same moment cannot slip by.
      const settle = {
        amountCents: input.amount_cents ?? auth.amount_cents,
        authorizationId: auth.id,
        merchantName: auth.merchant_name,
        processorTransactionId: requestTransactionId(ctx.creationKey),
      };
      return transactionView(await ctx.services.lifecycle.settle(card, settle, { onlyCapturable: true }));
    }),

  reverse: releaseProcedure("reverse", "The merchant reverses an authorization"),
  expire: releaseProcedure("expire", "An authorization expires unsettled"),

  refund: apiProcedure
    .meta({ openapi: { method: "POST", path: "/test_helpers/transactions/{id}/refund", tags: testTags, summary: "The merchant refunds (part of) a capture" } })
    .input(s.testRefundInput)
    .output(s.transaction)
    .mutation(async ({ ctx, input }) => {
      testMode(ctx.principal.mode);
      const txn = await ctx.services.lifecycle.findTransaction(ctx.principal, input.id);
      if (txn.type !== "capture") throw new AppError(409, "not_a_capture", "Only a capture can be refunded.");
      const card = await ctx.services.cards.find(ctx.principal, txn.card_id);
      ctx.response.status = 201;
      // As a merchant's refund: never more than its refunds left of the capture, nor than what the card's settlements left unrefunded.
      const refund = { amountCents: input.amount_cents ?? txn.amount_cents, merchantName: txn.merchant_name, processorTransactionId: requestTransactionId(ctx.creationKey) };
      return transactionView(await ctx.services.lifecycle.refund(card, refund, { ofCapture: txn }));
    }),

  expireHold: apiProcedure
    .meta({ openapi: { method: "POST", path: "/test_helpers/cards/{id}/expire_hold", tags: testTags, summary: "The processor cancels the card's hold (it lapsed)" } })
    .input(s.cardIdInput)
    .output(s.cardListItem)
    .mutation(async ({ ctx, input }) => {
      testMode(ctx.principal.mode);
      const card = await ctx.services.cards.find(ctx.principal, input.id);
      return cardListView(await ctx.services.lifecycle.expireHold(card));
    }),
});

/** Reverses or expires a pending authorization (test keys only); anything else is 409. */
function releaseProcedure(verb: "reverse" | "expire", summary: string) {
  const outcome = verb === "reverse" ? "reversed" : "expired";
  return apiProcedure
    .meta({ openapi: { method: "POST", path: `/test_helpers/authorizations/{id}/${verb}`, tags: testTags, summary } })
    .input(s.authorizationIdInput)
    .output(s.authorization)
    .mutation(async ({ ctx, input }) => {
      testMode(ctx.principal.mode);
      const auth = await ctx.services.lifecycle.findAuthorization(ctx.principal, input.id);
      const notPending = (a: { status: string }) =>
        new AppError(409, "authorization_not_pending", `Authorization ${input.id} is ${a.status}, not pending.`, { status: a.status });
      if (auth.status !== "pending") throw notPending(auth);
      const released = await ctx.services.lifecycle.release(auth, outcome);
      // A capture (or another release) got there first: its change stands, this one did nothing.
      if (released.status !== outcome) throw notPending(released);
      return authorizationView(released);
    });
}

/** A list of the card money lifecycle: newest first, `card_id` keeps one card's. */
function lifecycleList<T, V>(
  path: `/${string}`,
  summary: string,
  item: z.ZodType<V>,
  list: (ctx: Context & { principal: Principal }, cardId: string | undefined, page: PageQuery) => Promise<Page<T>>,
  view: (row: T) => V,
) {
  return apiProcedure
    .meta({ openapi: { method: "GET", path, tags: [path.slice(1)], summary } })
    .input(s.listByCardInput)
    .output(s.listOf(item))
    .query(async ({ ctx, input }) => {
      const page = await list(ctx, input.card_id, { limit: input.limit, startingAfter: input.starting_after });
      return { data: page.data.map(view), has_more: page.has_more };
    });
}

export const authorizationsRouter = router({
  list: lifecycleList(
    "/authorizations",
    "List authorizations, newest first",
    s.authorization,
    (ctx, cardId, page) => ctx.services.lifecycle.listAuthorizations(ctx.principal, cardId, page),
    authorizationView,
  ),
});

export const transactionsRouter = router({
  list: lifecycleList(
    "/transactions",
    "List transactions (captures and refunds), newest first",
    s.transaction,
    (ctx, cardId, page) => ctx.services.lifecycle.listTransactions(ctx.principal, cardId, page),
    transactionView,
  ),
});
