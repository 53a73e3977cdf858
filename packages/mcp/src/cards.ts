import type { Approval, Card, CardCreated, CardDetail, Cardctl, PendingApproval } from "@cardctl/sdk";
import { DecisionTimeoutError, formatMoney, type ApprovalState } from "@cardctl/sdk";
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js";
import type { CallToolResult, ServerNotification, ServerRequest } from "@modelcontextprotocol/sdk/types.js";
import { ok } from "./results.js";

export type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;

/** Longest wait one tool call may block for a human (request_card, wait_for_approval). */
export const MAX_WAIT_SECONDS = 300;
const PROGRESS_MS = 2000;

/** A card as the tools show it: never the ephemeral key (reveal_card is the one way to the number). */
export function publicCard(card: CardDetail | Card): Card {
  const { ephemeral_key_secret: _key, reveal: _reveal, processor_card_id: _pid, ...rest } = card as CardDetail;
  return rest;
}

export function describeCard(card: Card | CardCreated | CardDetail): string {
  const limit = "spending_limit_cents" in card ? card.spending_limit_cents : card.amount_cents;
  return `card ${card.id} (${card.status}, limit ${formatMoney(limit)}, ${formatMoney(card.remaining_cents)} left, ends in ${card.last_four}, unused until ${card.expires_at})`;
}

/** A card just created, in the shape every other tool shows a card in (GET /v1/cards): its purpose is the request's. */
export const asListed = ({ spending_limit_cents, ...card }: CardCreated, purpose: string | null): Card => ({ ...card, amount_cents: spending_limit_cents, purpose });

type Outcome =
  | { outcome: "issued"; card: Card; approval: Approval | null }
  | { outcome: "pending_approval"; card: null; approval: Approval | { id: string; status: "PENDING"; expires_at: string } }
  | { outcome: "rejected" | "expired"; card: null; approval: Approval };

const answer = (text: string, o: Outcome) => ok(text, o);

/** An issued card, shown as GET /v1/cards shows it whichever way it was issued (request_card, wait_for_approval). */
export const issued = (card: Card | CardDetail, approval: Approval | null) =>
  answer(`Issued ${describeCard(card)}. Get its number with reveal_card right before paying; it takes one purchase. If you will not use it, close_card releases its hold.`, {
    outcome: "issued",
    card: publicCard(card),
    approval,
  });

export const pending = (p: PendingApproval | Approval) => {
  const approval = "approval_id" in p ? { id: p.approval_id, status: "PENDING" as const, expires_at: p.expires_at } : p;
  return answer(
    `A human must approve request ${approval.id} (it expires at ${approval.expires_at} if nobody decides). Call wait_for_approval with id ${approval.id} to wait for the decision.`,
    { outcome: "pending_approval", card: null, approval },
  );
};

const decided = (approval: Approval) =>
  answer(
    approval.status === "REJECTED"
      ? `Request ${approval.id} was rejected${approval.reason ? `: ${approval.reason}` : ""}. No card was issued.`
      : `Request ${approval.id} expired before anyone decided. No card was issued.`,
    { outcome: approval.status === "REJECTED" ? "rejected" : "expired", card: null, approval },
  );

/**
 * Waits up to waitSeconds for a human's decision on an approval, with a progress notification every
 * 2 s when the client asked for progress; cancelled with the call. Still pending at the end is an
 * answer (call again), not an error.
 */
export async function awaitDecision(client: Cardctl, id: string, waitSeconds: number, extra: Extra): Promise<CallToolResult> {
  const token = extra._meta?.progressToken;
  const started = Date.now();
  const progress = () => {
    if (token === undefined) return;
    const elapsed = Math.round((Date.now() - started) / 1000);
    extra
      .sendNotification({
        method: "notifications/progress",
        params: { progressToken: token, progress: elapsed, total: waitSeconds, message: `Waiting for a human to decide on ${id}: ${elapsed} s of ${waitSeconds} s` },
      })
      .catch(() => {}); // a client gone away ends the call through extra.signal
  };
  progress();
  const timer = setInterval(progress, PROGRESS_MS);
  try {
    // The SDK's own polling: every second at first, then less often (up to 15 s), so a long wait
    // spends few of the key's hourly requests.
    return answerFor(await client.approvals.waitForDecision(id, { timeoutMs: waitSeconds * 1000, signal: extra.signal }));
  } catch (err) {
    if (!(err instanceof DecisionTimeoutError)) throw err;
    // Decided right at the deadline or not: one last look.
    return currentDecision(client, id, extra);
  } finally {
    clearInterval(timer);
  }
}

/** An approval request as it stands now: still pending, or decided (with its card when approved). */
export async function currentDecision(client: Cardctl, id: string, extra: Extra): Promise<CallToolResult> {
  // PENDING too while an approved request's card is being created: never a not_found to retry around.
  return answerFor(await client.approvals.decision(id, { signal: extra.signal }));
}

const answerFor = (state: ApprovalState) =>
  state.status === "PENDING" ? pending(state.approval) : state.status === "APPROVED" ? issued(state.card, state.approval) : decided(state.approval);
