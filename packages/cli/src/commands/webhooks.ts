import type { WebhookDelivery, WebhookEndpoint } from "@cardctl/sdk";
import type { Command } from "commander";
import { ctxOf, type Ctx } from "../context.js";
import { UsageError } from "../errors.js";
import { parseDuration, parseEventTypes, parseLimit } from "../options.js";
import { fetchList } from "../pages.js";
import { confirmOrRefuse } from "../prompt.js";
import { relativeTime, truncate, type Style } from "../output.js";

const DELIVERY_STATUSES = ["pending", "succeeded", "failed"];
const COLOURS: Record<string, Style> = { enabled: "green", disabled: "red", succeeded: "green", pending: "yellow", failed: "red" };
const coloured = (ctx: Ctx, status: string) => ctx.out.style(status, COLOURS[status] ?? "dim");

function printEndpoint(ctx: Ctx, e: WebhookEndpoint): void {
  ctx.out.kv([
    ["Endpoint", e.id],
    ["URL", e.url],
    ["Events", e.events.join(", ")],
    ...(e.description ? ([["Description", e.description]] as [string, string][]) : []),
    ["Status", coloured(ctx, e.status)],
    ["Mode", e.mode],
    ...(e.previous_secret_expires_at ? ([["Previous secret", `also signs until ${e.previous_secret_expires_at} (${relativeTime(e.previous_secret_expires_at)})`]] as [string, string][]) : []),
  ]);
}

/** The longest overlap of a rotated-out secret the API takes (7 days). */
const MAX_PREVIOUS_SECRET_MS = 7 * 86_400_000;

/** The signing secret of an answer, with what to do with it. */
function printSecret(ctx: Ctx, secret: string, hint: string): void {
  ctx.out.line("");
  ctx.out.kv([["Signing secret", ctx.out.style(secret, "bold")]]);
  ctx.out.hint(hint);
}

/** What the last attempt got: the HTTP status, or the error when there was no answer. */
const lastAnswer = (d: WebhookDelivery) => (d.last_response_status !== null ? `HTTP ${d.last_response_status}` : d.last_error ? truncate(d.last_error, 40) : "-");

export function registerWebhooks(program: Command): void {
  const webhooks = program
    .command("webhooks")
    .description("Webhook endpoints: the account's events POSTed to your URL, signed (Standard Webhooks); needs a full key");

  webhooks
    .command("create <url>")
    .description("Create an endpoint; prints its signing secret once")
    .option("--events <types>", 'comma-separated event types, e.g. approval.created,card.used ("*": all)', "*")
    .option("--description <text>", "what the endpoint is for")
    .addHelpText(
      "after",
      `
The URL must be https:// on a host with public addresses (the server refuses loopback and private
ones unless it runs with WEBHOOK_ALLOW_PRIVATE=1). To receive events on your own machine while
developing, run: cardctl listen --forward-to http://localhost:3000/webhooks`,
    )
    .action(async (url: string, o: { events: string; description?: string }, cmd: Command) => {
      const ctx = ctxOf(cmd);
      const body = { url, events: parseEventTypes(o.events, "--events") as any, ...(o.description !== undefined ? { description: o.description } : {}) };
      const e = await ctx.out.spin("Creating the webhook endpoint", () => ctx.client().webhookEndpoints.create(body));
      if (ctx.out.json) return ctx.out.printJson(e);
      const { out } = ctx;
      out.line(`${out.style("✓", "green")} Webhook endpoint created.`);
      printEndpoint(ctx, e);
      printSecret(
        ctx,
        e.secret,
        "Store the signing secret now: it is not shown again. Verify each delivery with it (webhook-id, webhook-timestamp, webhook-signature), e.g. new Webhook(secret).verify(body, headers) from the standardwebhooks package.",
      );
    });

  webhooks
    .command("get <endpoint_id>")
    .description("Show an endpoint")
    .action(async (id: string, _o: unknown, cmd: Command) => {
      const ctx = ctxOf(cmd);
      const e = await ctx.out.spin("Fetching the webhook endpoint", () => ctx.client().webhookEndpoints.get(id));
      if (ctx.out.json) return ctx.out.printJson(e);
      printEndpoint(ctx, e);
    });

  webhooks
    .command("update <endpoint_id>")
    .description("Change an endpoint's URL, event types or description; only what is given changes")
    .option("--url <url>", "the new URL (checked as at creation)")
    .option("--events <types>", 'comma-separated event types ("*": all)')
    .option("--description <text>", 'what the endpoint is for ("" removes it)')
    .action(async (id: string, o: { url?: string; events?: string; description?: string }, cmd: Command) => {
      const ctx = ctxOf(cmd);
      if (o.url === undefined && o.events === undefined && o.description === undefined) throw new UsageError("Give at least one of --url, --events, --description.");
      const body = {
        ...(o.url !== undefined ? { url: o.url } : {}),
        ...(o.events !== undefined ? { events: parseEventTypes(o.events, "--events") as any } : {}),
        ...(o.description !== undefined ? { description: o.description === "" ? null : o.description } : {}),
      };
      const e = await ctx.out.spin("Updating the webhook endpoint", () => ctx.client().webhookEndpoints.update(id, body));
      if (ctx.out.json) return ctx.out.printJson(e);
      ctx.out.line(`${ctx.out.style("✓", "green")} Webhook endpoint updated.`);
      printEndpoint(ctx, e);
    });

  for (const [name, status, what] of [
    ["enable", "enabled", "Enable an endpoint again: it receives the events that happen from now on (retry a failed delivery to send it again)"],
    ["disable", "disabled", "Disable an endpoint: nothing more is sent to it, its pending deliveries fail"],
  ] as const)
    webhooks
      .command(`${name} <endpoint_id>`)
      .description(what)
      .action(async (id: string, _o: unknown, cmd: Command) => {
        const ctx = ctxOf(cmd);
        const e = await ctx.out.spin(`${name === "enable" ? "Enabling" : "Disabling"} the webhook endpoint`, () => ctx.client().webhookEndpoints.update(id, { status }));
        if (ctx.out.json) return ctx.out.printJson(e);
        ctx.out.line(`${ctx.out.style("✓", "green")} Webhook endpoint ${e.id} ${status}.`);
      });

  webhooks
    .command("rotate-secret <endpoint_id>")
    .description("Replace the signing secret; prints the new one once. The previous one keeps signing too for a while")
    .option("--expire-previous-in <duration>", "how long deliveries are signed with the previous secret too (e.g. 2h, 3d; 0: stop now; at most 7d)", "24h")
    .action(async (id: string, o: { expirePreviousIn: string }, cmd: Command) => {
      const ctx = ctxOf(cmd);
      const ms = parseDuration(o.expirePreviousIn, "--expire-previous-in");
      if (ms % 1000 !== 0) throw new UsageError("--expire-previous-in must be whole seconds.");
      if (ms > MAX_PREVIOUS_SECRET_MS) throw new UsageError(`--expire-previous-in must be at most 7d, got "${o.expirePreviousIn}".`);
      const e = await ctx.out.spin("Rotating the signing secret", () => ctx.client().webhookEndpoints.rotateSecret(id, { expire_previous_in_seconds: ms / 1000 }));
      if (ctx.out.json) return ctx.out.printJson(e);
      ctx.out.line(`${ctx.out.style("✓", "green")} Signing secret rotated.`);
      printEndpoint(ctx, e);
      printSecret(
        ctx,
        e.secret,
        e.previous_secret_expires_at
          ? `Store the new secret now: it is not shown again. Until ${e.previous_secret_expires_at} each delivery is signed with both secrets, so your receiver verifies with either while you switch it over.`
          : "Store the new secret now: it is not shown again. The previous secret signs nothing from now on.",
      );
    });

  webhooks
    .command("list")
    .description("List endpoints, newest first")
    .option("--limit <n>", "page size, 1..100 (default 20)")
    .action(async (o: { limit?: string }, cmd: Command) => {
      const ctx = ctxOf(cmd);
      const { out } = ctx;
      const params = o.limit !== undefined ? { limit: parseLimit(o.limit) } : {};
      const page = (await out.spin("Fetching webhook endpoints", async () => await ctx.client().webhookEndpoints.list(params))).toJSON();
      if (out.json) return out.printJson(page);
      out.table(
        ["ID", "STATUS", "URL", "EVENTS", "CREATED"],
        page.data.map((e) => [e.id, coloured(ctx, e.status), e.url, e.events.join(","), relativeTime(e.created_at)]),
        "No webhook endpoints. Create one with: cardctl webhooks create https://… --events '*'",
        // The URL tells endpoints apart and is never cut: CREATED, then the event types, give way to it.
        { shrink: ["EVENTS"], drop: ["CREATED", "EVENTS"] },
      );
      if (page.has_more) out.hint("More endpoints exist: use a larger --limit.");
    });

  webhooks
    .command("delete <endpoint_id>")
    .description("Delete an endpoint and its deliveries (asks first on a terminal; --yes elsewhere)")
    .option("-y, --yes", "do not ask for confirmation")
    .action(async (id: string, o: { yes?: boolean }, cmd: Command) => {
      const ctx = ctxOf(cmd);
      await confirmOrRefuse(o.yes, {
        what: `delete ${id}`,
        question: `Delete webhook endpoint ${id} and its deliveries? This cannot be undone.`,
        aborted: "Aborted; the endpoint was not deleted.",
      });
      const r = await ctx.out.spin("Deleting the webhook endpoint", () => ctx.client().webhookEndpoints.del(id));
      if (ctx.out.json) return ctx.out.printJson(r);
      ctx.out.line(`${ctx.out.style("✓", "green")} Webhook endpoint ${r.id} deleted.`);
    });

  webhooks
    .command("deliveries <endpoint_id>")
    .description("List an endpoint's deliveries, newest first: status, attempts, last answer, next attempt")
    .option("--status <status>", `only ${DELIVERY_STATUSES.join(", ")}`)
    .option("--limit <n>", "page size, 1..100 (default 20)")
    .option("--all", "follow every page")
    .action(async (id: string, o: { status?: string; limit?: string; all?: boolean }, cmd: Command) => {
      const ctx = ctxOf(cmd);
      const { out } = ctx;
      const params: { status?: any; limit?: number } = {};
      if (o.status !== undefined) {
        const s = o.status.toLowerCase();
        if (!DELIVERY_STATUSES.includes(s)) throw new UsageError(`--status must be one of ${DELIVERY_STATUSES.join(", ")}.`);
        params.status = s;
      }
      if (o.limit !== undefined) params.limit = parseLimit(o.limit);
      const client = ctx.client();
      const page = await fetchList(out, "deliveries", o, () => client.webhookEndpoints.deliveries(id, params));
      if (out.json) return out.printJson(page);
      out.table(
        ["ID", "STATUS", "EVENT", "ATTEMPTS", "LAST ANSWER", "NEXT ATTEMPT", "CREATED"],
        page.data.map((d) => [
          d.id,
          coloured(ctx, d.status),
          d.event_type,
          String(d.attempts),
          lastAnswer(d),
          d.next_attempt_at ? relativeTime(d.next_attempt_at) : "-",
          relativeTime(d.created_at),
        ]),
        "No deliveries yet.",
        { shrink: ["LAST ANSWER", "EVENT"] },
      );
      if (page.has_more) out.hint("More deliveries exist: use --all or a larger --limit.");
    });

  webhooks
    .command("retry <endpoint_id> <delivery_id>")
    .description("Send a delivery again now (enables a disabled endpoint again)")
    .action(async (id: string, deliveryId: string, _o: unknown, cmd: Command) => {
      const ctx = ctxOf(cmd);
      const client = ctx.client();
      // The retry enables a disabled endpoint: said, since the endpoint then takes every new event again.
      const { d, wasDisabled } = await ctx.out.spin("Retrying the delivery", async () => {
        const wasDisabled = (await client.webhookEndpoints.get(id)).status === "disabled";
        return { d: await client.webhookEndpoints.retry(id, deliveryId), wasDisabled };
      });
      if (ctx.out.json) return ctx.out.printJson(d);
      ctx.out.line(`${ctx.out.style("✓", "green")} Delivery ${d.id} of ${d.event_type} ${d.event_id} will be sent again now.`);
      if (wasDisabled) ctx.out.line(`Endpoint ${id} was disabled: it is enabled again, and receives new events from now on.`);
    });
}
