import { formatMoney, schemas as s } from "@cardctl/sdk";
import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { describeCard } from "../cards.js";
import { guarded, ok } from "../results.js";
import type { ToolContext } from "./context.js";

/**
 * The humans' tools, registered only for full-role keys: an agent-role key never sees them (and the
 * API refuses these calls from such a key anyway).
 */
export function registerHumanTools(server: McpServer, { client }: ToolContext): void {
  server.registerTool(
    "approve_request",
    {
      title: "Approve a card request",
      description: "A human approves a pending request: the hold is placed and the card is issued now.",
      inputSchema: s.approvalIdInput,
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: true },
    },
    guarded(async ({ id }, extra) => {
      const card = await client.approvals.approve(id, { signal: extra.signal });
      return ok(`Approved ${id}: issued ${describeCard(card)}.`, { approval_id: id, card });
    }),
  );

  server.registerTool(
    "reject_request",
    {
      title: "Reject a card request",
      description: "A human rejects a pending request, with an optional reason the agent sees.",
      inputSchema: s.rejectInput,
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true },
    },
    guarded(async ({ id, reason }, extra) => {
      const r = await client.approvals.reject(id, { reason }, { signal: extra.signal });
      return ok(`Rejected ${id}.`, { approval_id: id, ...r });
    }),
  );

  server.registerTool(
    "update_policy",
    {
      title: "Update the spending policy",
      description: "Changes the default policy: max_amount_cents per card and/or approval_required. Members left out keep their value.",
      inputSchema: s.updatePolicyInput,
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true },
    },
    guarded(async (params, extra) => {
      const p = await client.policies.updateDefault(params, { signal: extra.signal });
      return ok(`The policy is now: up to ${formatMoney(p.max_amount_cents)} per card; ${p.approval_required ? "every card needs approval" : "no approval needed"}.`, p);
    }),
  );
}
