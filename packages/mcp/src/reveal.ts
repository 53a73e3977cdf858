import type { Cardctl } from "@cardctl/sdk";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { ok } from "./results.js";

/**
 * How reveal_card answers. `details`: it fetches number and CVC from the processor itself (stdio:
 * the MCP server runs on the agent's machine). `key`: it returns only the ephemeral key and the
 * processor URL to fetch from (the MCP endpoint of the service: no card number passes through it);
 * `baseUrl` makes a processor path on the service (the simulated processor) absolute.
 */
export type RevealMode = { kind: "details" } | { kind: "key"; baseUrl: string };

export async function revealCard(client: Cardctl, id: string, mode: RevealMode, signal: AbortSignal): Promise<CallToolResult> {
  if (mode.kind === "details") {
    const d = await client.cards.reveal(id, { signal });
    const exp = `${String(d.exp_month).padStart(2, "0")}/${d.exp_year}`;
    return ok(
      `Card ${id}: number ${d.number}, CVC ${d.cvc}, expires ${exp}. Use it only for the purchase it was issued for, and do not repeat it in messages or logs.`,
      { card_id: id, ...d },
    );
  }
  const card = await client.cards.get(id, {}, { signal });
  // A path on the service (the simulated processor) goes under the base, its own path (a proxy's prefix) kept.
  const url = card.reveal.url.startsWith("/") ? `${mode.baseUrl.replace(/\/$/, "")}${card.reveal.url}` : card.reveal.url;
  const headers: Record<string, string> = { Authorization: `Bearer ${card.ephemeral_key_secret}` };
  if (card.reveal.api_version) headers["Stripe-Version"] = card.reveal.api_version;
  const fetchUrl = `${url}${url.includes("?") ? "&" : "?"}expand[]=number&expand[]=cvc`;
  return ok(
    `This server never handles card numbers. Fetch card ${id}'s number and CVC from the card processor yourself: GET ${fetchUrl} with the headers in the structured result (the key is short-lived and works for this card only). The card ends in ${card.last_four}.`,
    { card_id: id, last_four: card.last_four, ephemeral_key_secret: card.ephemeral_key_secret, reveal: { method: "GET", url: fetchUrl, headers } },
  );
}
