import { formatMoney, schemas as s } from "@cardctl/sdk";
import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { z } from "zod";
import { MAX_WAIT_SECONDS, asListed, awaitDecision, currentDecision, describeCard, issued, publicCard, type Extra } from "../cards.js";
import { guarded, ok } from "../results.js";
import { revealCard } from "../reveal.js";
import type { ToolContext } from "./context.js";

const waitSeconds = (fallback: number) =>
  z.number().int().min(0).max(MAX_WAIT_SECONDS).default(fallback).describe(`Seconds to wait for a human's decision, 0..${MAX_WAIT_SECONDS}`);

const requestCardInput = s.createCardInput.extend({
  wait_seconds: waitSeconds(0).describe(
    `When a human must approve: seconds to wait for the decision before answering (0..${MAX_WAIT_SECONDS}; default 0 answers at once with the pending approval)`,
  ),
  // Required: a tool call the client retried after a timeout would otherwise make a second card.
  idempotency_key: z
    .string()
    .min(1)
    .max(199)
    // It travels as the Idempotency-Key header, which carries printable ASCII only.
    // Not starting or ending with a space, which HTTP clients trim from a header (" k " would be "k").
    .regex(/^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/, "must be printable ASCII (letters, digits, - _ : and the like) without spaces at either end: it is sent as the Idempotency-Key header")
    .describe(
      "A key of your own for this purchase (say the order id, or a new UUID). Retry with the same key after an error or a timeout: it answers with the first card (or approval), never a second one. A new purchase needs a new key.",
    ),
});
/**
 * 45 s by default: within the 60 s an MCP client waits for a call by default (the SDK's), which
 * progress notifications extend only for a client that asks for it (resetTimeoutOnProgress).
 */
const waitInput = s.approvalIdInput.extend({ wait_seconds: waitSeconds(45) });

/** The tools every key may use: an agent asks for, reads, reveals and closes its cards. */
export function registerAgentTools(server: McpServer, { client, reveal }: ToolContext): void {
  server.registerTool(
    "request_card",
    {
      title: "Request a virtual card",
      description:
        "Asks for a single-use virtual card with a spending limit in cents. Answers with the card (outcome 'issued'), " +
        "or, when the spending policy needs a human, with the approval request (outcome 'pending_approval'); set wait_seconds to wait for the decision. " +
        "Errors: setup_required (a human must finish set-up at details.setup_url), policy_violation (details.max_amount_cents is the most allowed), payment_method_declined (the account's payment method refused the hold; a human must update it).",
      inputSchema: requestCardInput,
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
    },
    guarded(async ({ wait_seconds, idempotency_key, ...params }, extra) => {
      const created = await client.cards.create(params, { idempotencyKey: idempotency_key, signal: extra.signal });
      if (created.status !== "PENDING_APPROVAL") return issued(asListed(created, params.purpose ?? null), null);
      // Read as it stands: a retry under the same key replays the first answer (202), though a
      // human may have decided since.
      return wait_seconds > 0 ? awaitDecision(client, created.approval_id, wait_seconds, extra) : currentDecision(client, created.approval_id, extra);
    }),
  );

  server.registerTool(
    "wait_for_approval",
    {
      title: "Wait for a human's decision",
      description:
        "Waits up to wait_seconds (default 45) for a human to approve or reject a card request, with progress notifications. " +
        "Answers with the card (outcome 'issued'), 'rejected', 'expired', or 'pending_approval' when nobody decided yet (call again).",
      inputSchema: waitInput,
      annotations: { readOnlyHint: true, openWorldHint: true },
    },
    guarded(({ id, wait_seconds }, extra) => awaitDecision(client, id, wait_seconds, extra)),
  );

  server.registerTool(
    "get_card",
    {
      title: "Get a card",
      description: "One card: status (OPEN, USED, CLOSED), limit, remaining and spent cents, last four digits, expiry.",
      inputSchema: s.cardIdInput,
      annotations: { readOnlyHint: true },
    },
    guarded(async ({ id }, extra) => {
      const card = await client.cards.get(id, {}, { signal: extra.signal });
      return ok(`This is ${describeCard(card)}.`, { card: publicCard(card) });
    }),
  );

  server.registerTool(
    "list_cards",
    {
      title: "List cards",
      description: "The account's cards, newest first, one page at a time (pass the last id as starting_after for the next page).",
      inputSchema: s.listCardsInput,
      annotations: { readOnlyHint: true },
    },
    guarded(async (params, extra) => {
      const page = await client.cards.list(params, { signal: extra.signal });
      const lines = page.data.map((c) => `- ${describeCard(c)}`);
      const text = page.data.length ? `${page.data.length} card(s)${page.has_more ? " (more after the last)" : ""}:\n${lines.join("\n")}` : "No cards.";
      return ok(text, { data: page.data, has_more: page.has_more });
    }),
  );

  server.registerTool(
    "close_card",
    {
      title: "Close a card",
      description:
        "Closes a card you will not use, for good: the processor declines anything more on it and its hold is released. Closing a closed card succeeds; a used card is deactivated by its purchase already and cannot be closed (card_not_open).",
      inputSchema: s.cardIdInput,
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true },
    },
    guarded(async ({ id }, extra) => {
      const closed = await client.cards.close(id, { signal: extra.signal });
      return ok(`Card ${id} is closed.`, { card_id: id, ...closed });
    }),
  );

  server.registerTool(
    "reveal_card",
    {
      title: "Reveal a card's number",
      description:
        reveal.kind === "details"
          ? "The card's number, CVC and expiry, read straight from the card processor (never through the cardctl service). Treat them as secrets."
          : "How to read the card's number and CVC from the card processor: a short-lived key and the URL to fetch (this server never handles card numbers).",
      inputSchema: s.cardIdInput,
      annotations: { readOnlyHint: true, openWorldHint: true },
    },
    guarded(({ id }, extra) => revealCard(client, id, reveal, extra.signal)),
  );

  server.registerTool(
    "get_balance",
    {
      title: "Spend summary",
      description: "Held cents, open cards, pending approvals, the policy's maximum per card, whether approval is required and set-up is complete.",
      annotations: { readOnlyHint: true },
    },
    guarded(async (extra: Extra) => {
      const b = await client.balance.retrieve({ signal: extra.signal });
      const text =
        `${formatMoney(b.held_cents)} held on ${b.open_cards} open card(s); ${b.pending_approvals} request(s) waiting for approval; ` +
        `up to ${formatMoney(b.max_per_card_cents)} per card${b.approval_required ? ", every card needs a human's approval" : ""}` +
        `${b.setup_complete ? "" : "; set-up is not complete, cards cannot be issued yet"}.`;
      return ok(text, b);
    }),
  );

  server.registerTool(
    "get_policy",
    {
      title: "Get the spending policy",
      description: "The account's default policy: max_amount_cents per card and whether every card needs a human's approval.",
      annotations: { readOnlyHint: true },
    },
    guarded(async (extra: Extra) => {
      const p = await client.policies.retrieveDefault({ signal: extra.signal });
      return ok(`Up to ${formatMoney(p.max_amount_cents)} per card; ${p.approval_required ? "every card needs a human's approval" : "no approval needed"}.`, p);
    }),
  );

  server.registerTool(
    "check_policy",
    {
      title: "Check a card request (dry run)",
      description:
        "What request_card would do now with these arguments, without doing it: decision 'issue', 'approval_required' or 'denied', " +
        "with machine-readable reasons (setup_required, amount_over_max, approval_required). Makes no card, approval or hold.",
      inputSchema: s.policyCheckInput,
      annotations: { readOnlyHint: true },
    },
    guarded(async (params, extra) => {
      const r = await client.policies.check(params, { signal: extra.signal });
      const reasons = r.reasons.map((x) => `${x.code}: ${x.message}`).join("; ");
      return ok(`Decision: ${r.decision}${reasons ? ` (${reasons})` : ""}.`, r);
    }),
  );

  server.registerTool(
    "list_approvals",
    {
      title: "List approval requests",
      description: "Card requests waiting for (or decided by) a human, newest first; status defaults to PENDING.",
      inputSchema: s.listApprovalsInput,
      annotations: { readOnlyHint: true },
    },
    guarded(async (params, extra) => {
      const page = await client.approvals.list(params, { signal: extra.signal });
      const lines = page.data.map((a) => `- ${a.id}: ${formatMoney(a.amount_cents)} ${a.status}${a.purpose ? ` for "${a.purpose}"` : ""}, expires ${a.expires_at}`);
      return ok(page.data.length ? `${page.data.length} request(s):\n${lines.join("\n")}` : "No requests.", { data: page.data, has_more: page.has_more });
    }),
  );
}
