import { CardctlError } from "@cardctl/sdk";
import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import pkg from "../package.json" with { type: "json" };
import { createCardctlMcpServer } from "./server.js";

// stdout carries the protocol: everything for humans goes to stderr.
const say = (line: string) => process.stderr.write(`cardctl-mcp: ${line}\n`);

const USAGE = `cardctl-mcp ${pkg.version}: cardctl's MCP server over stdio, for agent runtimes (Claude Desktop, Cursor, …).

Environment:
  CARDCTL_API_KEY    the API key (sk_test_… or sk_live_…); an agent-role key gets the agent tools only
  CARDCTL_BASE_URL   where the cardctl service runs (default http://127.0.0.1:4000)
`;

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  if (args.includes("--help") || args.includes("-h")) return void process.stdout.write(USAGE);
  if (args.includes("--version") || args.includes("-v")) return void process.stdout.write(`${pkg.version}\n`);
  const apiKey = process.env.CARDCTL_API_KEY;
  if (!apiKey) {
    say("CARDCTL_API_KEY is not set: set it to an API key of your cardctl account (see --help).");
    process.exit(2);
  }
  const baseUrl = process.env.CARDCTL_BASE_URL;
  let server: McpServer;
  try {
    const opened = await createCardctlMcpServer({ api: { apiKey, baseUrl }, reveal: { kind: "details" } });
    server = opened.server;
    say(`serving ${opened.baseUrl} with ${opened.key.mode} key ${opened.key.id} (${opened.key.role} role)`);
  } catch (err) {
    say(err instanceof CardctlError ? `cannot use the cardctl service at ${baseUrl ?? "http://127.0.0.1:4000"}: ${err.code}: ${err.message}` : String(err));
    process.exit(1);
  }
  await server.connect(new StdioServerTransport());
}

await main();
