import { accountView, createdKeyView, keyView } from "../domain/accounts.js";
import { isoTime } from "../domain/ids.js";
import { attentionCardView, operatorPaymentView } from "../domain/views.js";
import * as s from "@cardctl/contract";
import { z } from "zod";
import { adminProcedure, router } from "../trpc.js";

const tags = ["operator"];
/** The id in the path; strict, as every operator input is: an unknown field is a 400, not ignored. */
const accountId = z.strictObject({ id: z.string().min(1).max(64) });
/** An account's or a key's name, trimmed as the owner API trims it: a blank one is refused. */
const name = z.string().trim().min(1).max(200);

/** The operator API (DESIGN 3.3), mounted at /admin/v1; stands in for the spec's dashboard. */
export const adminRouter = router({
  createAccount: adminProcedure
    .meta({ openapi: { method: "POST", path: "/accounts", tags, summary: "Create an account" } })
    .input(z.strictObject({ name }))
    .output(s.account)
    .mutation(async ({ ctx, input }) => {
      ctx.response.status = 201;
      return accountView(await ctx.services.accounts.create(input.name));
    }),

  getAccount: adminProcedure
    .meta({ openapi: { method: "GET", path: "/accounts/{id}", tags, summary: "Get an account" } })
    .input(accountId)
    .output(s.account)
    .query(async ({ ctx, input }) => accountView(await ctx.services.accounts.get(input.id))),

  setKyb: adminProcedure
    .meta({ openapi: { method: "POST", path: "/accounts/{id}/kyb", tags, summary: "Record business verification" } })
    .input(accountId.extend({ verified: s.exact(z.boolean()) }))
    .output(s.account)
    .mutation(async ({ ctx, input }) => accountView(await ctx.services.accounts.setKyb(input.id, input.verified))),

  setPaymentMethod: adminProcedure
    .meta({ openapi: { method: "POST", path: "/accounts/{id}/payment_method", tags, summary: "Save (or remove) the payment method" } })
    .input(accountId.extend({ payment_method: z.string().regex(/^pm_[A-Za-z0-9_]{1,200}$/, "must look like pm_…").nullable() }))
    .output(s.account)
    .mutation(async ({ ctx, input }) => accountView(await ctx.services.accounts.setPaymentMethod(input.id, input.payment_method, "required"))),

  setCardholder: adminProcedure
    .meta({
      openapi: {
        method: "POST",
        path: "/accounts/{id}/cardholder",
        tags,
        summary: "Set who the account's cards are issued to (required before Stripe card creation)",
      },
    })
    .input(accountId.extend(s.cardholderFields).superRefine(s.cardholderRules))
    .output(s.account)
    .mutation(async ({ ctx, input }) => {
      const { id, ...details } = input;
      return accountView(await ctx.services.accounts.setCardholder(id, details));
    }),

  inviteOwner: adminProcedure
    .meta({
      openapi: {
        method: "POST",
        path: "/accounts/{id}/owners",
        tags,
        summary: "Invite an owner: a one-time link, valid 24 h, to set a password and sign in to the dashboard",
      },
    })
    .input(accountId.extend({ email: s.ownerEmail }))
    .output(s.ownerInvite)
    .mutation(async ({ ctx, input }) => {
      const invite = await ctx.services.owners.invite(input.id, input.email);
      ctx.response.status = 201;
      return { id: invite.ownerId, account_id: input.id, email: invite.email, invite_url: invite.url, invite_expires_at: isoTime(invite.expiresAt) };
    }),

  createKey: adminProcedure
    .meta({ openapi: { method: "POST", path: "/accounts/{id}/keys", tags, summary: "Create an API key (secret shown once)" } })
    .input(accountId.extend({ mode: s.mode, role: s.role.default("full"), name: name.optional() }))
    .output(s.createdKey)
    .mutation(async ({ ctx, input }) => {
      const { key, secret } = await ctx.services.accounts.createKey(input.id, input.mode, input.role, input.name ?? null);
      ctx.response.status = 201;
      return createdKeyView(key, secret);
    }),

  listKeys: adminProcedure
    .meta({ openapi: { method: "GET", path: "/accounts/{id}/keys", tags, summary: "List an account's keys" } })
    .input(accountId)
    .output(z.object({ data: z.array(s.apiKey) }))
    .query(async ({ ctx, input }) => ({ data: (await ctx.services.accounts.listKeys(input.id)).map(keyView) })),

  listPaymentProblems: adminProcedure
    .meta({
      openapi: {
        method: "GET",
        path: "/payments",
        tags,
        summary: "Payments to follow up: charges the payment method declined (uncollected) and repeated failures (attention)",
      },
    })
    .input(s.listPaymentProblemsInput.strict())
    .output(z.object({ data: z.array(s.operatorPayment) }))
    .query(async ({ ctx, input }) => ({
      data: (await ctx.services.payments.problems({ status: input.status, accountId: input.account_id })).map((p) => operatorPaymentView(p.payment, p.waivedCents)),
    })),

  listCardsAttention: adminProcedure
    .meta({
      openapi: {
        method: "GET",
        path: "/cards/attention",
        tags,
        summary: "Cards whose processor follow-up (revoke, hold release) kept failing and is no longer retried on its own",
      },
    })
    .input(s.listCardsAttentionInput.strict())
    .output(z.object({ data: z.array(s.attentionCard) }))
    .query(async ({ ctx, input }) => ({ data: (await ctx.services.cards.needingAttention(input.account_id)).map(attentionCardView) })),

  retryCardRecovery: adminProcedure
    .meta({ openapi: { method: "POST", path: "/cards/{id}/retry_recovery", tags, summary: "Hand a card that needs attention back to the recovery pass, due now" } })
    .input(accountId)
    .output(s.attentionCard)
    .mutation(async ({ ctx, input }) => attentionCardView(await ctx.services.cards.retryRecovery(input.id))),

  revokeKey: adminProcedure
    .meta({ openapi: { method: "POST", path: "/keys/{id}/revoke", tags, summary: "Revoke a key, effective immediately" } })
    .input(accountId)
    .output(z.object({ ok: z.literal(true), revoked_at: z.string() }))
    .mutation(async ({ ctx, input }) => ({ ok: true as const, revoked_at: isoTime(await ctx.services.accounts.revokeKey(input.id)) })),
});

export type AdminRouter = typeof adminRouter;
