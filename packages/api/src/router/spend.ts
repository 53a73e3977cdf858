import { z } from "zod";
import { ownerProcedure, router } from "../trpc.js";

/** The dashboard's Spend page (tRPC only, for the owner's session): settled money per UTC day. */
export const spendRouter = router({
  daily: ownerProcedure
    .input(z.strictObject({ days: z.number().int().min(1).max(90).default(30) }).default({ days: 30 }))
    .output(z.array(z.object({ date: z.string(), spent_cents: z.number().int(), transactions: z.number().int() })))
    .query(({ ctx, input }) => ctx.services.spend.daily(ctx.principal, input.days)),
});
