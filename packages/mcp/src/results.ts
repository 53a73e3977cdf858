import { CardctlError, formatMoney, PaymentDeclinedError, PolicyViolationError, SetupRequiredError } from "@cardctl/sdk";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";

/**
 * A tool's answer: a short sentence for the model, and the object as structured content and, as
 * the MCP spec asks of a tool with structured content, as JSON text too: many clients hand the
 * model only `content` (reveal_card's key and URL would not reach it).
 */
export const ok = (text: string, data: object): CallToolResult => ({
  content: [
    { type: "text", text },
    { type: "text", text: JSON.stringify(data) },
  ],
  structuredContent: data as Record<string, unknown>,
});

/**
 * An API failure as an MCP tool error (isError), so the model sees it and can act: our error code
 * and message, and the details that say what to do (the setup_url, the policy maximum).
 * Anything else is not an API answer and is rethrown (the MCP SDK reports its message).
 */
export function toolError(err: unknown): CallToolResult {
  if (!(err instanceof CardctlError)) throw err;
  let text = `${err.code}: ${err.message}`;
  if (err instanceof SetupRequiredError && err.setupUrl) text += ` A human must finish the account's set-up at ${err.setupUrl}.`;
  if (err instanceof PaymentDeclinedError) text += " Nothing was held; a human must update the account's payment method before a card can be issued.";
  if (err instanceof PolicyViolationError && err.maxAmountCents !== undefined)
    text += ` The most one card may hold is ${err.maxAmountCents} cents (${formatMoney(err.maxAmountCents)}); ask for less, or ask a human to raise the policy.`;
  const error = { code: err.code, message: err.message, status: err.status ?? null, details: err.details, request_id: err.requestId ?? null };
  // As for a success: the object as JSON text too, for clients that hand the model only the text.
  return { isError: true, content: [{ type: "text", text }, { type: "text", text: JSON.stringify({ error }) }], structuredContent: { error } };
}

/** Runs a tool's body, answering API failures as tool errors. */
export const guarded =
  <A extends unknown[]>(body: (...args: A) => Promise<CallToolResult>) =>
  async (...args: A): Promise<CallToolResult> => {
    try {
      return await body(...args);
    } catch (err) {
      return toolError(err);
    }
  };
