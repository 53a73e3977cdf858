import * as s from "@cardctl/contract";
import { eventView } from "../domain/events.js";
import { apiProcedure, router } from "../trpc.js";

const tags = ["events"];

/** The account's events (DESIGN 3.7), in the key's mode; the live stream is GET /v1/events/stream (server). */
export const eventsRouter = router({
  list: apiProcedure
    .meta({ openapi: { method: "GET", path: "/events", tags, summary: "List events of the last 30 days, newest first" } })
    .input(s.listEventsInput)
    .output(s.listOf(s.event))
    .query(async ({ ctx, input }) => {
      const page = await ctx.services.events.list(ctx.principal, { type: input.type }, { limit: input.limit, startingAfter: input.starting_after });
      return { data: page.data.map(eventView), has_more: page.has_more };
    }),

  get: apiProcedure
    .meta({ openapi: { method: "GET", path: "/events/{id}", tags, summary: "Get an event" } })
    .input(s.eventIdInput)
    .output(s.event)
    .query(async ({ ctx, input }) => eventView(await ctx.services.events.find(ctx.principal, input.id))),
});
