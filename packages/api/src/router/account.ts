import { approvalView, cardCreatedView } from "../domain/views.js";
import * as s from "@cardctl/contract";
import { apiProcedure, fullAccessProcedure, router } from "../trpc.js";

export const balanceRouter = router({
  retrieve: apiProcedure
    .meta({ openapi: { method: "GET", path: "/balance", tags: ["balance"], summary: "Spend summary" } })
    .input(s.noInput)
    .output(s.balance)
    .query(({ ctx }) => ctx.services.cards.balance(ctx.principal)),
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
});

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
