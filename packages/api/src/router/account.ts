import * as s from "@cardctl/contract";
import { z } from "zod";
import { createdKeyView, keyView } from "../domain/accounts.js";
import { actorOf } from "../domain/events.js";
import { isoTime } from "../domain/ids.js";
import { approvalView, cardCreatedView } from "../domain/views.js";
import { apiProcedure, fullAccessProcedure, ownerProcedure, router } from "../trpc.js";

export const balanceRouter = router({
  retrieve: apiProcedure
    .meta({ openapi: { method: "GET", path: "/balance", tags: ["balance"], summary: "Spend summary" } })
    .input(s.noInput)
    .output(s.balance)
    .query(({ ctx }) => ctx.services.cards.balance(ctx.principal)),
});

export const apiKeysRouter = router({
  current: apiProcedure
    .meta({ openapi: { method: "GET", path: "/api_keys/current", tags: ["api keys"], summary: "The API key making this request: its id, account, mode and role" } })
    .input(s.noInput)
    .output(s.currentKey)
    .query(({ ctx }) => ({ id: ctx.principal.keyId, account_id: ctx.principal.accountId, mode: ctx.principal.mode, role: ctx.principal.role })),

  // The dashboard's API keys page (tRPC only, for the owner's session): the account's keys of both modes.
  list: ownerProcedure
    .input(s.listOwnerKeysInput)
    .output(s.listOf(s.apiKey))
    .query(async ({ ctx, input }) => {
      const page = await ctx.services.accounts.pageKeys(ctx.principal.accountId, { limit: input?.limit ?? 20, startingAfter: input?.starting_after });
      return { data: page.data.map(keyView), has_more: page.has_more };
    }),

  /** A key of the session's mode; its secret is in this answer only. */
  create: ownerProcedure
    .input(s.ownerCreateKeyInput)
    .output(s.createdKey)
    .mutation(async ({ ctx, input }) => {
      const p = ctx.principal;
      const { key, secret } = await ctx.services.accounts.createKey(p.accountId, p.mode, input.role, input.name ?? null, actorOf(p));
      return createdKeyView(key, secret);
    }),

  revoke: ownerProcedure
    .input(s.keyIdInput)
    .output(z.object({ ok: z.literal(true), revoked_at: z.string() }))
    .mutation(async ({ ctx, input }) => ({
      ok: true as const,
      revoked_at: isoTime(await ctx.services.accounts.revokeKey(input.id, actorOf(ctx.principal), ctx.principal.accountId)),
    })),
});

export const policiesRouter = router({
  retrieveDefault: apiProcedure
    .meta({ openapi: { method: "GET", path: "/policies/default", tags: ["policies"], summary: "Get the default policy" } })
    .input(s.noInput)
    .output(s.policy)
    .query(({ ctx }) => ctx.services.policies.read(ctx.principal)),

  updateDefault: fullAccessProcedure
    .meta({ openapi: { method: "PUT", path: "/policies/default", tags: ["policies"], summary: "Update the default policy" } })
    .input(s.updatePolicyInput)
    .output(s.policy)
    .mutation(({ ctx, input }) => ctx.services.policies.update(ctx.principal, input)),

  check: apiProcedure
    .meta({
      openapi: {
        method: "POST",
        path: "/policies/check",
        tags: ["policies"],
        summary: "Dry run of a card request: would POST /v1/cards issue, ask for approval, or refuse?",
        description:
          "Runs the decision of POST /v1/cards (set-up, policy maximum, approval) on this request and reports it; " +
          "makes no card, approval or hold and writes nothing. Read-only: Idempotency-Key is ignored, every call answers afresh.",
      },
    })
    .input(s.policyCheckInput)
    .output(s.policyCheck)
    .mutation(async ({ ctx, input }) => {
      const { decision, reasons, effective_policy } = await ctx.services.cards.check(ctx.principal, input);
      return { decision, reasons, effective_policy };
    }),
});

/** POSTs that only read (dry runs): no Idempotency-Key handling, so a repeat answers afresh. */
export const READ_ONLY_POSTS = { rest: ["/v1/policies/check"], trpc: ["policies.check"] } as const;

/**
 * POSTs whose answer holds a new API key's secret: they refuse an Idempotency-Key, whose stored
 * answer would keep the secret for a day where only the key's sha256 may be kept (spec 5.4).
 */
export const SECRET_ANSWER_POSTS = { trpc: ["apiKeys.create"] } as const;

export const approvalsRouter = router({
  list: apiProcedure
    .meta({ openapi: { method: "GET", path: "/approvals", tags: ["approvals"], summary: "List approval requests" } })
    .input(s.listApprovalsInput)
    .output(s.listOf(s.approval))
    .query(async ({ ctx, input }) => {
      const page = await ctx.services.approvals.list(ctx.principal, input.status, {
        limit: input.limit,
        startingAfter: input.starting_after,
      });
      return { data: page.data.map(approvalView), has_more: page.has_more };
    }),

  retrieve: apiProcedure
    .meta({ openapi: { method: "GET", path: "/approvals/{id}", tags: ["approvals"], summary: "Retrieve an approval request" } })
    .input(s.approvalIdInput)
    .output(s.approval)
    .query(async ({ ctx, input }) => approvalView(await ctx.services.approvals.get(ctx.principal, input.id))),

  approve: fullAccessProcedure
    .meta({
      openapi: { method: "POST", path: "/approvals/{id}/approve", tags: ["approvals"], summary: "Approve and issue the card" },
    })
    .input(s.approvalIdInput)
    .output(s.cardCreated)
    .mutation(async ({ ctx, input }) => {
      const card = await ctx.services.approvals.approve(ctx.principal, input.id, ctx.creationKey);
      ctx.response.status = 201;
      return cardCreatedView(card);
    }),

  reject: fullAccessProcedure
    .meta({ openapi: { method: "POST", path: "/approvals/{id}/reject", tags: ["approvals"], summary: "Reject a request" } })
    .input(s.rejectInput)
    .output(s.rejectOutput)
    .mutation(async ({ ctx, input }) => {
      await ctx.services.approvals.reject(ctx.principal, input.id, input.reason ?? null, ctx.creationKey);
      return { ok: true as const, status: "REJECTED" as const };
    }),
});
