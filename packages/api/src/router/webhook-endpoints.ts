import * as s from "@cardctl/contract";
import { deliveryView, endpointView } from "../domain/webhook-views.js";
import { fullAccessProcedure, router } from "../trpc.js";

const tags = ["webhook endpoints"];

/** Outgoing webhooks (DESIGN 3.7): full-role keys only; endpoints belong to the key's account and mode. */
export const webhookEndpointsRouter = router({
  create: fullAccessProcedure
    .meta({
      openapi: {
        method: "POST",
        path: "/webhook_endpoints",
        tags,
        summary: "Create a webhook endpoint; its signing secret is in this answer only",
        description:
          "Events of the key's mode whose type is in `events` (or all, with [\"*\"]) are POSTed to `url`, signed as Standard Webhooks specifies " +
          "(webhook-id, webhook-timestamp, webhook-signature). The url must be https:// and resolve to public addresses, unless the server sets WEBHOOK_ALLOW_PRIVATE.",
      },
    })
    .input(s.createWebhookEndpointInput)
    .output(s.createdWebhookEndpoint)
    .mutation(async ({ ctx, input }) => {
      const endpoint = await ctx.services.webhookEndpoints.create(ctx.principal, input);
      ctx.response.status = 201;
      return { ...endpointView(endpoint), secret: endpoint.secret };
    }),

  list: fullAccessProcedure
    .meta({ openapi: { method: "GET", path: "/webhook_endpoints", tags, summary: "List webhook endpoints, newest first" } })
    .input(s.listWebhookEndpointsInput)
    .output(s.listOf(s.webhookEndpoint))
    .query(async ({ ctx, input }) => {
      const page = await ctx.services.webhookEndpoints.list(ctx.principal, { limit: input.limit, startingAfter: input.starting_after });
      return { data: page.data.map(endpointView), has_more: page.has_more };
    }),

  get: fullAccessProcedure
    .meta({ openapi: { method: "GET", path: "/webhook_endpoints/{id}", tags, summary: "Retrieve a webhook endpoint" } })
    .input(s.webhookEndpointIdInput)
    .output(s.webhookEndpoint)
    .query(async ({ ctx, input }) => endpointView(await ctx.services.webhookEndpoints.get(ctx.principal, input.id))),

  update: fullAccessProcedure
    .meta({
      openapi: {
        method: "POST",
        path: "/webhook_endpoints/{id}",
        tags,
        summary: "Update a webhook endpoint: url, events, description, or enable / disable it",
        description:
          "Only the fields given change. `status: \"disabled\"` stops deliveries (pending ones fail; attempts in flight finish); `status: \"enabled\"` " +
          "resumes them with the events that happen from then on (retry a failed delivery to send it again). Announced by webhook_endpoint.updated, " +
          "webhook_endpoint.disabled or webhook_endpoint.enabled. A new url is checked as at creation.",
      },
    })
    .input(s.updateWebhookEndpointInput)
    .output(s.webhookEndpoint)
    .mutation(async ({ ctx, input }) => {
      const { id, ...change } = input;
      return endpointView(await ctx.services.webhookEndpoints.update(ctx.principal, id, change));
    }),

  rotateSecret: fullAccessProcedure
    .meta({
      openapi: {
        method: "POST",
        path: "/webhook_endpoints/{id}/rotate_secret",
        tags,
        summary: "Replace the signing secret; the new one is in this answer only",
        description:
          "For `expire_previous_in_seconds` (default 24 hours, at most 7 days) each delivery's webhook-signature carries two signatures, " +
          "one with each secret, so a receiver verifies with either while it switches. Announced by webhook_endpoint.secret_rotated (without secrets).",
      },
    })
    .input(s.rotateWebhookSecretInput)
    .output(s.createdWebhookEndpoint)
    .mutation(async ({ ctx, input }) => {
      const endpoint = await ctx.services.webhookEndpoints.rotateSecret(ctx.principal, input.id, input.expire_previous_in_seconds);
      return { ...endpointView(endpoint), secret: endpoint.secret };
    }),

  delete: fullAccessProcedure
    .meta({ openapi: { method: "DELETE", path: "/webhook_endpoints/{id}", tags, summary: "Delete a webhook endpoint and its deliveries" } })
    .input(s.webhookEndpointIdInput)
    .output(s.deletedWebhookEndpoint)
    .mutation(async ({ ctx, input }) => {
      await ctx.services.webhookEndpoints.remove(ctx.principal, input.id);
      return { id: input.id, deleted: true as const };
    }),

  deliveries: fullAccessProcedure
    .meta({ openapi: { method: "GET", path: "/webhook_endpoints/{id}/deliveries", tags, summary: "List an endpoint's deliveries, newest first" } })
    .input(s.listWebhookDeliveriesInput)
    .output(s.listOf(s.webhookDelivery))
    .query(async ({ ctx, input }) => {
      const page = await ctx.services.webhookEndpoints.deliveries(ctx.principal, input.id, input.status, { limit: input.limit, startingAfter: input.starting_after });
      return { data: page.data.map(deliveryView), has_more: page.has_more };
    }),

  retry: fullAccessProcedure
    .meta({
      openapi: {
        method: "POST",
        path: "/webhook_endpoints/{id}/deliveries/{delivery_id}/retry",
        tags,
        summary: "Send a delivery again now",
        description:
          "A pending delivery is made due now; a succeeded or failed one gets one more attempt (no automatic retries after it). " +
          "Retrying a delivery of a disabled endpoint enables the endpoint again.",
      },
    })
    .input(s.retryWebhookDeliveryInput)
    .output(s.webhookDelivery)
    .mutation(async ({ ctx, input }) => deliveryView(await ctx.services.webhookEndpoints.retry(ctx.principal, input.id, input.delivery_id))),
});
