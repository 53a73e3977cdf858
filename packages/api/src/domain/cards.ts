import { In, IsNull } from "typeorm";
import { affected } from "../db/datasource.js";
import { CardEntity, type Account, type Approval, type Card, type Mode } from "../db/entities.js";
import { missingSetup, type AccountService } from "./accounts.js";
import type { ApprovalService } from "./approvals.js";
import { backoffMs, MAX_ATTEMPTS } from "./backoff.js";
import type { Deps, Principal } from "./deps.js";
import { AppError, notFound } from "./errors.js";
import { processorAccount, type CardIssuer } from "./issuance.js";
import { pageOf, type Page, type PageQuery } from "./paging.js";
import type { RevealEndpoint } from "../processor/types.js";
import type { PolicyOverride } from "./policy.js";
import { callProcessor, toApiError } from "./processor-call.js";
import { decideIssuance, type IssuanceDecision, type IssuanceRequest } from "./rules.js";
import type { Processor, ProcessorAccount } from "../processor/types.js";
import { attentionCardView, cardListView, type PublicCardStatus } from "./views.js";
import { fastRepository, queryRows, runSql } from "../db/fast.js";
import { CARD_FOLLOW_UP } from "../db/migrations/1734200000000-card-sweep-indexes.js";
import { LISTED_CARDS } from "../db/migrations/1734600000000-listed-cards-index.js";
import { commitWithEvents, actorOf, SYSTEM, type Actor } from "./events.js";

export interface CreateCardInput {
  amount_cents: number;
  agent_id?: string;
  purpose?: string;
  policy_override?: PolicyOverride;
}

export type CreateCardResult = { kind: "card"; card: Card } | { kind: "pending"; approval: Approval };

/** A card's processor, and its view of the card's account. */
interface ProcessorOf {
  processor: Processor;
  pa: ProcessorAccount;
}

const VISIBLE: Card["status"][] = ["OPEN", "USED", "CLOSED"];

/** Cards the recovery queue may try now (one parameter: now): not left to an operator, and not waiting out a backoff. */
export const DUE_FOR_RECOVERY = "needs_attention = 0 AND (recovery_next_at IS NULL OR recovery_next_at <= ?)";

/**
 * Cards whose processor follow-up is outstanding: what the recovery pass works on, and what the
 * operator's attention list shows, so a card whose follow-up something else finished (a processor's
 * webhook, the owner's close) leaves that list. Written as its index's condition, word for word.
 */
const FOLLOW_UP_OUTSTANDING = `(${CARD_FOLLOW_UP})`;

/**
 * The operator's attention list: cards the recovery pass gave up on whose follow-up is still
 * outstanding. needs_attention alone is not it: the flag stays set when something else (a
 * processor's webhook, an operator's SQL) finishes the follow-up.
 */
const IN_ATTENTION = `${FOLLOW_UP_OUTSTANDING} AND needs_attention = 1`;

/**
 * USED cards past expires_at, still to deactivate at the processor (one parameter: now): the
 * expiry sweep's, outside CARD_FOLLOW_UP (a partial index cannot hold a condition on the time).
 */
export const EXPIRED_USED = "status = 'USED' AND revoked_at IS NULL AND expires_at <= ?";
/** Those the recovery pass gave up on: on the attention list too (one parameter: now). */
const EXPIRED_USED_IN_ATTENTION = `${EXPIRED_USED} AND needs_attention = 1`;
/** Cards whose creation the recovery pass could not finish (not even try at the processor): an operator's. */
const CREATING_IN_ATTENTION = "status = 'CREATING' AND needs_attention = 1";

/**
 * Held amount and open cards from the account's counters in card_balances, uncollected money (the
 * declined charges, less what refunds waived of them) from its index range (ix_payments_account). Summing the open cards cost as much as the account had of
 * them; the counters cost the same at 100 cards or 100,000. They are spread over up to 16 slots
 * per account and mode so that concurrent card transitions of one account do not queue on one row
 * lock (MariaDB), and kept by triggers on `cards` (migration 1733900000000), so every writer (this
 * domain, the processors' webhooks, recovery, the maintenance pass, even an operator's SQL) keeps
 * them right.
 */
const BALANCE_SQL = `SELECT
  (SELECT COALESCE(SUM(held_cents), 0) FROM card_balances WHERE account_id = ? AND mode = ?) AS held,
  (SELECT COALESCE(SUM(open_cards), 0) FROM card_balances WHERE account_id = ? AND mode = ?) AS open,
  (SELECT COALESCE(SUM(CASE WHEN status = 'uncollected' THEN amount_cents ELSE -amount_cents END), 0) FROM payments
    WHERE account_id = ? AND mode = ? AND status IN ('uncollected', 'waived')) AS uncollected`;

/** Cards: creation under the policy, reads, closing, and purchases that make a card USED. */
export class CardService {
  constructor(
    private readonly deps: Deps,
    private readonly accounts: AccountService,
    private readonly approvals: ApprovalService,
    private readonly issuer: CardIssuer,
  ) {}

  private get repo() {
    return fastRepository(this.deps.ds, CardEntity);
  }

  /**
   * Order of checks (DESIGN 3.4): setup → policy maximum → approval → hold and mint. A retry whose
   * request died (`retried`) is answered from what that request made, if anything: its card or its
   * approval, even if the policy changed since (deciding afresh would make the other one too).
   */
  async create(p: Principal, input: CreateCardInput, creationKey?: string, retried = false): Promise<CreateCardResult> {
    const { account, decision } = await this.decide(p, input);
    const earlier = retried && creationKey ? await this.madeBy(p, account, creationKey) : null;
    if (earlier) return earlier;
    if (decision.error) throw decision.error;
    const fields = { amountCents: input.amount_cents, agentId: input.agent_id ?? null, purpose: input.purpose ?? null };
    if (decision.decision === "approval_required") {
      const approval = await this.approvals.request(p, {
        ...fields,
        overrideMax: input.policy_override?.max_amount_cents ?? null,
        creationKey: creationKey ?? null,
      });
      return { kind: "pending", approval };
    }
    return { kind: "card", card: await this.issuer.issue(p, account, { ...fields, creationKey: creationKey ?? null }) };
  }

  /** What an earlier claim of a creation key made: its approval, or its card unless that failed. */
  private async madeBy(p: Principal, account: Account, creationKey: string): Promise<CreateCardResult | null> {
    const approval = await this.approvals.byCreationKey(creationKey);
    if (approval) return { kind: "pending", approval };
    const card = await this.repo.findOneBy({ creation_key: creationKey });
    const resumed = card ? await this.issuer.resume(account, card.id, actorOf(p)) : null;
    return resumed ? { kind: "card", card: resumed } : null;
  }

  /**
   * The dry run of `create` (POST /v1/policies/check): the same decision, from the same reads,
   * acted on by nothing: no card, approval or hold, and nothing written.
   */
  async check(p: Principal, input: IssuanceRequest): Promise<IssuanceDecision> {
    return (await this.decide(p, input)).decision;
  }

  /** What `create` would do with this request now (rules.ts decideIssuance), and the account it read. */
  private async decide(p: Principal, input: IssuanceRequest) {
    const { account, policy: base } = await this.accounts.getWithPolicy(p);
    const state = { account, base, needs: this.accounts.setupNeeds(p.mode), publicUrl: this.deps.config.publicUrl };
    return { account, decision: decideIssuance(state, input) };
  }

  async list(p: Principal, filters: { status?: PublicCardStatus; agent_id?: string }, page: PageQuery): Promise<Page<Card>> {
    return pageOf(
      this.repo,
      { account_id: p.accountId, mode: p.mode },
      {
        ...(filters.status !== undefined ? { status: filters.status } : {}),
        ...(filters.agent_id !== undefined ? { agent_id: filters.agent_id } : {}),
      },
      page,
      filters.status === undefined ? (card) => VISIBLE.includes(card.status) : undefined,
      // By status: from the statuses' partial index (pinned unless the agent's may serve better).
      filters.status !== undefined
        ? { condition: LISTED_CARDS, index: filters.agent_id === undefined ? "ix_cards_status" : undefined }
        : { index: filters.agent_id === undefined ? "ix_cards_list" : undefined },
    );
  }

  async find(p: Principal, id: string): Promise<Card> {
    const card = await this.repo.findOneBy({ id, account_id: p.accountId, mode: p.mode, status: In(VISIBLE) });
    if (!card) throw notFound("card");
    return card;
  }

  /**
   * A card the processor names (its card id, or ours from the card's metadata), in a mode; null if
   * unknown. By our id only while the card records no other processor card: a processor card left
   * over from a lost mint carries our card's id too, and must not spend that card's hold.
   */
  async findByProcessor(ref: { mode: Mode; processorCardId?: string; cardId?: string }): Promise<Card | null> {
    const byProcessor = ref.processorCardId ? await this.repo.findOneBy({ processor_card_id: ref.processorCardId, mode: ref.mode }) : null;
    if (byProcessor || !ref.cardId) return byProcessor;
    const byOurs = await this.repo.findOneBy({ id: ref.cardId, mode: ref.mode });
    return byOurs && (!ref.processorCardId || byOurs.processor_card_id === null) ? byOurs : null;
  }

  /** The card and a fresh ephemeral key secret for the processor's client-side reveal. */
  async reveal(p: Principal, id: string, nonce?: string): Promise<{ card: Card; ephemeralKeySecret: string; revealEndpoint: RevealEndpoint }> {
    const card = await this.find(p, id);
    const processor = this.deps.processors(p.mode);
    const account = await this.accounts.get(p.accountId);
    const key = await callProcessor("ephemeral_key", this.deps.config.processorTimeoutMs, (signal) =>
      processor.createEphemeralKey(processorAccount(account, p.mode), card.processor_card_id!, nonce, signal),
    ).catch((err) => {
      throw toApiError(err);
    });
    return { card, ephemeralKeySecret: key.secret, revealEndpoint: processor.revealEndpoint(card.processor_card_id!) };
  }

  /**
   * Closes a card: CLOSED is claimed first with a conditional update (so a racing purchase either
   * wins before it or is declined after it), then the card is revoked and its hold cancelled.
   * If the processor fails, the card stays CLOSED and a retry or the recovery pass finishes it.
   * The close that closes it reports the processor's failure (502); closing a card already CLOSED
   * is OK (the spec: closing is idempotent), its follow-up tried again and, failing, left to the pass.
   */
  async close(p: Principal, id: string): Promise<Card> {
    let card = await this.find(p, id);
    if (card.status === "USED")
      throw new AppError(409, "card_not_open", "This card was already used; it is deactivated and cannot be closed.", { status: "USED" });
    if (card.status === "CLOSED") {
      await this.finishClose(card, actorOf(p)).then(() => this.recovered(card), () => undefined);
      return card;
    }
    // Until this close or another one closes it: a card used meanwhile and given back (its
    // authorization reversed or declined) is OPEN again, and is closed again, never revoked OPEN.
    while (card.status === "OPEN") {
      this.deps.processors(p.mode);
      const closedAt = Date.now();
      await commitWithEvents(
        this.deps.ds,
        [this.repo.updateStatement({ id, status: "OPEN" }, { status: "CLOSED", closed_at: closedAt }, 1)],
        [{ accountId: p.accountId, mode: p.mode, type: "card.closed", object: cardListView({ ...card, status: "CLOSED", closed_at: closedAt }), actor: actorOf(p) }],
      );
      card = await this.find(p, id);
      if (card.status === "USED") throw new AppError(409, "card_not_open", "This card was used before it could be closed.", { status: "USED" });
    }
    await this.finishClose(card, actorOf(p));
    await this.recovered(card);
    return card;
  }

  /** Revokes a CLOSED card at the processor and cancels its hold; each step runs once. */
  async finishClose(card: Card, actor: Actor = SYSTEM): Promise<void> {
    if (card.revoked_at !== null && card.hold_status !== "OPEN") return;
    const via = await this.processorFor(card);
    try {
      if (card.revoked_at === null) await this.revoke(card, via);
      if (card.hold_status === "OPEN") await this.issuer.releaseHold(card, via.pa, via.processor, actor);
    } catch (err) {
      throw toApiError(err);
    }
  }

  /** The card's processor and the processor's view of the card's account. */
  private async processorFor(card: Card): Promise<ProcessorOf> {
    const processor = this.deps.processors(card.mode);
    return { processor, pa: processorAccount(await this.accounts.get(card.account_id), card.mode) };
  }

  /** Cancels the card at the processor (idempotent there too) and records it once. */
  private async revoke(card: Card, { processor, pa }: ProcessorOf): Promise<void> {
    await callProcessor("revoke", this.deps.config.processorTimeoutMs, (signal) =>
      processor.revokeCard(pa, card.processor_card_id!, `${card.id}:revoke`, signal),
    );
    await this.repo.update({ id: card.id, revoked_at: IsNull() }, { revoked_at: Date.now() });
  }

  /** Deactivates a used or expired card at the processor, once; the maintenance pass retries. */
  async deactivate(card: Card): Promise<void> {
    if (card.revoked_at !== null || card.processor_card_id === null) return;
    await this.revoke(card, await this.processorFor(card));
  }

  /**
   * Recovery: finishes the processor side of CLOSED, USED and FAILED cards left half done. A queue
   * ordered by next attempt: a card that fails waits out a backoff, so cards that keep failing
   * never hold back the others (see followUp).
   */
  async settleLeftovers(): Promise<number> {
    // Both databases sort NULL (never failed) first.
    const rows = await this.repo.findWhereSql(`${FOLLOW_UP_OUTSTANDING} AND ${DUE_FOR_RECOVERY}`, [Date.now()], " ORDER BY recovery_next_at ASC, seq ASC LIMIT 100");
    let n = 0;
    for (const card of rows) if ((await this.claimFollowUp(card)) && (await this.followUp(card))) n++;
    return n;
  }

  /**
   * Takes a card's follow-up for this pass: its next attempt moves a lease on (conditional on the
   * value read), so passes at once, on one instance or several, work it once; a pass that dies
   * leaves it due again when the lease ends.
   */
  async claimFollowUp(card: Card): Promise<boolean> {
    const until = Date.now() + this.deps.config.creationLeaseMs;
    const res = await this.repo.update({ id: card.id, needs_attention: false, recovery_next_at: card.recovery_next_at ?? IsNull() }, { recovery_next_at: until });
    if (affected(res) !== 1) return false;
    card.recovery_next_at = until;
    return true;
  }

  /**
   * One attempt at a card's processor follow-up (USED: revoke; CLOSED: revoke, release the hold;
   * FAILED: release the hold, revoke a card its mint may have made). A failure is tried again
   * after a backoff, and after MAX_ATTEMPTS the card is left to an operator (`needingAttention`,
   * `retryRecovery`); a success clears the count.
   */
  async followUp(card: Card): Promise<boolean> {
    try {
      if (card.status === "USED") await this.deactivate(card);
      else if (card.status === "CLOSED") await this.finishClose(card);
      else {
        const pa = processorAccount(await this.accounts.get(card.account_id), card.mode);
        const processor = this.deps.processors(card.mode);
        if (card.hold_status === "OPEN" || card.hold_status === "PENDING") await this.issuer.releaseHold(card, pa, processor, SYSTEM, true);
        if (card.revoked_at === null) await this.issuer.revokeLostMint(card, pa, processor, true);
      }
    } catch (err) {
      const apiError = toApiError(err);
      await this.recoveryFailed(card, apiError instanceof Error ? apiError.message : String(apiError));
      return false;
    }
    await this.recovered(card);
    return true;
  }

  /** Forgets the failed attempts of a card whose follow-up is done (by the recovery pass, or a close retried by its owner). */
  private async recovered(card: Card): Promise<void> {
    if (card.recovery_attempts > 0)
      await this.repo.update(
        { id: card.id, recovery_attempts: card.recovery_attempts },
        { recovery_attempts: 0, recovery_next_at: null, recovery_error: null, needs_attention: false },
      );
  }

  /**
   * A failed follow-up (or attempt at finishing a card's creation): the next attempt after a
   * backoff, or an operator after MAX_ATTEMPTS. The update is conditional on the attempts read: of
   * instances failing on the card at once, one counts.
   */
  async recoveryFailed(card: Card, error: string): Promise<void> {
    const attempts = card.recovery_attempts + 1;
    const attention = attempts >= MAX_ATTEMPTS;
    const failed = { recovery_attempts: attempts, recovery_next_at: attention ? null : Date.now() + backoffMs(attempts), recovery_error: error.slice(0, 500), needs_attention: attention };
    await commitWithEvents(
      this.deps.ds,
      [this.repo.updateStatement({ id: card.id, recovery_attempts: card.recovery_attempts }, failed, 1)],
      attention
        ? [{ accountId: card.account_id, mode: card.mode, type: "processor.attention_needed", object: attentionCardView({ ...card, ...failed }), actor: SYSTEM }]
        : [],
    );
  }

  /**
   * Cards whose processor follow-up needs an operator (and is still outstanding), newest first (at
   * most 100): those of CARD_FOLLOW_UP (by its partial index), the expired USED ones still to
   * deactivate (by the expiry index) and creations the recovery pass could not finish.
   */
  async needingAttention(accountId?: string): Promise<Card[]> {
    const scope = accountId ? { sql: " AND account_id = ?", params: [accountId] } : { sql: "", params: [] };
    const lists = await Promise.all([
      this.repo.findWhereSql(`${IN_ATTENTION}${scope.sql}`, scope.params, " ORDER BY seq DESC LIMIT 100", "ix_cards_follow_up"),
      this.repo.findWhereSql(`${EXPIRED_USED_IN_ATTENTION}${scope.sql}`, [Date.now(), ...scope.params], " ORDER BY seq DESC LIMIT 100"),
      this.repo.findWhereSql(`${CREATING_IN_ATTENTION}${scope.sql}`, scope.params, " ORDER BY seq DESC LIMIT 100"),
    ]);
    return lists.flat().sort((a, b) => b.seq - a.seq).slice(0, 100);
  }

  /**
   * An operator's retry of a card that needs attention: the recovery pass takes it again at once.
   * Its attempts stay counted, so one more failure puts it back in front of the operator.
   */
  async retryRecovery(id: string): Promise<Card> {
    const card = await this.repo.findOneBy({ id });
    if (!card) throw notFound("card");
    // The list's own condition, in the update: a card is handed back only if the list shows it.
    const res = await runSql(
      this.deps.ds,
      // A creation's is due at once too: its lease, which the last attempt renewed, ends now.
      `UPDATE cards SET needs_attention = 0, recovery_next_at = NULL, lease_until = CASE WHEN status = 'CREATING' THEN 0 ELSE lease_until END WHERE id = ? AND ((${IN_ATTENTION}) OR (${EXPIRED_USED_IN_ATTENTION}) OR (${CREATING_IN_ATTENTION}))`,
      [id, Date.now()],
    );
    if (affected(res) !== 1) throw new AppError(409, "card_not_in_attention", "This card does not need attention: the recovery pass handles it.");
    return { ...card, needs_attention: false, recovery_next_at: null };
  }

  /** The spend summary (GET /v1/balance): money held, open cards, pending approvals, the policy's limits. */
  async balance(p: Principal) {
    // One fixed SQL string for the money (TypeORM's query builder would rebuild it on every call).
    const [[row], pending, { account, policy }] = await Promise.all([
      queryRows(this.deps.ds, BALANCE_SQL, [p.accountId, p.mode, p.accountId, p.mode, p.accountId, p.mode]) as Promise<
        { held: string | number; open: string | number; uncollected: string | number }[]
      >,
      this.approvals.countPending(p),
      this.accounts.getWithPolicy(p),
    ]);
    return {
      held_cents: Number(row?.held ?? 0),
      open_cards: Number(row?.open ?? 0),
      pending_approvals: pending,
      max_per_card_cents: policy.max_amount_cents,
      approval_required: policy.approval_required,
      setup_complete: missingSetup(account, this.accounts.setupNeeds(p.mode)).length === 0,
      uncollected_cents: Number(row?.uncollected ?? 0),
    };
  }
}
