import * as s from "@cardctl/contract";
import { z } from "zod";
import { ownerProcedure, router } from "../trpc.js";

/** The simulated processor's test cards the owner may pick: one whose holds succeed, one it declines. */
export const TEST_CARDS = ["pm_card_visa", "pm_card_decline"] as const;

/**
 * The dashboard's Setup page (tRPC only, for the owner's session; API keys get 403): the account's
 * set-up state, and the owner adding the payment method, as a test card on the simulated processor
 * or through Stripe.js (a SetupIntent, confirmed in the browser, then read back here).
 */
export const setupRouter = router({
  status: ownerProcedure.input(s.noInput).query(({ ctx }) => ctx.services.setup.status(ctx.principal)),

  saveTestCard: ownerProcedure
    .input(z.strictObject({ payment_method: z.enum(TEST_CARDS) }))
    .mutation(({ ctx, input }) => ctx.services.setup.saveTestCard(ctx.principal, input.payment_method)),

  createSetupIntent: ownerProcedure.input(s.noInput).mutation(({ ctx }) => ctx.services.setup.startBrowserSetup(ctx.principal)),

  complete: ownerProcedure
    .input(z.strictObject({ setup_intent: z.string().min(1).max(255) }))
    .mutation(({ ctx, input }) => ctx.services.setup.finishBrowserSetup(ctx.principal, input.setup_intent)),
});
