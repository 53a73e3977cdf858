import { Cardctl, type ClientOptions, type CurrentApiKey } from "@cardctl/sdk";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import pkg from "../package.json" with { type: "json" };
import type { RevealMode } from "./reveal.js";
import { registerAgentTools } from "./tools/agent.js";
import { registerHumanTools } from "./tools/human.js";

export interface CardctlMcpOptions {
  /** How to reach the cardctl API with the caller's key: `apiKey`, `baseUrl`, and optionally `fetch`. */
  api: ClientOptions;
  reveal: RevealMode;
}

const INSTRUCTIONS =
  "cardctl issues single-use virtual payment cards under a spending policy. Amounts are integer cents (1250 = $12.50). " +
  "Call check_policy to see whether a request would be issued, need a human's approval or be refused; request_card to get a card " +
  "(one idempotency_key per purchase, the same one when retrying it; when it answers pending_approval, call wait_for_approval); reveal_card for the number right before paying. A card takes one purchase and is deactivated by it; close_card a card you will not use, to release its hold.";

/**
 * The cardctl MCP server for one API key, the same tools over stdio (cardctl-mcp) and Streamable
 * HTTP (/mcp on the service). It asks the API for the key's role first: `agent` keys get the agent
 * tools only. Rejects with the SDK's error when the key is refused (`status` 401) or the API is
 * unreachable.
 */
export async function createCardctlMcpServer({ api, reveal }: CardctlMcpOptions): Promise<{ server: McpServer; key: CurrentApiKey; baseUrl: string }> {
  const client = new Cardctl(api);
  const key = await client.apiKeys.current();
  const server = new McpServer({ name: "cardctl", title: "cardctl virtual cards", version: pkg.version }, { instructions: INSTRUCTIONS });
  registerAgentTools(server, { client, reveal });
  if (key.role === "full") registerHumanTools(server, { client, reveal });
  return { server, key, baseUrl: client.baseUrl };
}
