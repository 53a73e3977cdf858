import { router } from "../trpc.js";
import { apiKeysRouter, approvalsRouter, balanceRouter, policiesRouter } from "./account.js";
import { authorizationsRouter, cardsRouter, testHelpersRouter, transactionsRouter } from "./cards.js";
import { eventsRouter } from "./events.js";
import { setupRouter } from "./setup.js";
import { spendRouter } from "./spend.js";
import { webhookEndpointsRouter } from "./webhook-endpoints.js";

/** Every procedure of the public API: tRPC at /trpc, REST at /v1 through trpc-to-openapi. */
export const appRouter = router({
  cards: cardsRouter,
  balance: balanceRouter,
  apiKeys: apiKeysRouter,
  policies: policiesRouter,
  approvals: approvalsRouter,
  authorizations: authorizationsRouter,
  transactions: transactionsRouter,
  testHelpers: testHelpersRouter,
  events: eventsRouter,
  setup: setupRouter,
  webhookEndpoints: webhookEndpointsRouter,
  spend: spendRouter,
});

export type AppRouter = typeof appRouter;
