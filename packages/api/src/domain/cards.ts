import { In, IsNull, Not } from "typeorm";
import { affected } from "../db/datasource.js";
import { CardEntity, type Account, type Approval, type Card, type Mode } from "../db/entities.js";
import { missingSetup, type AccountService } from "./accounts.js";
import type { ApprovalService } from "./approvals.js";
import type { Deps, Principal } from "./deps.js";
import { AppError, notFound } from "./errors.js";
import { processorAccount, type CardIssuer } from "./issuance.js";
import { pageOf, type Page, type PageQuery } from "./paging.js";
import { effectivePolicy, type PolicyOverride } from "./policy.js";
import type { PolicyService } from "./policies.js";
import { callProcessor, toApiError } from "./processor-call.js";
import { assertPolicy, assertSetup } from "./rules.js";
import type { Processor, ProcessorAccount } from "../processor/types.js";
import type { PublicCardStatus } from "./views.js";
import { fastRepository, queryRows } from "../db/fast.js";

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

export interface PurchaseResult {
  approved: boolean;
  decline_reason: string | null;
  amount_cents: number;
  card: Card;
}

const VISIBLE: Card["status"][] = ["OPEN", "USED", "CLOSED"];

/**
 * Held amount and open cards, each from its own index range (ix_cards_held covers the sum,
 * ix_cards_status the count): the cost follows the open cards, never the account's history, and
 * needs no planner statistics. One `(hold OPEN OR status OPEN)` query was planned as a walk over
 * every card of the account when SQLite had no statistics (1.5 ms on 10,000 cards).
 */
const BALANCE_SQL = `SELECT
  (SELECT COALESCE(SUM(amount_cents), 0) FROM cards WHERE account_id = ? AND mode = ? AND hold_status = 'OPEN') AS held,
  (SELECT COUNT(1) FROM cards WHERE account_id = ? AND mode = ? AND status = 'OPEN') AS open`;

/** Cards: creation under the policy, reads, closing, and purchases that make a card USED. */
export class CardService {
  constructor(
    private readonly deps: Deps,
    private readonly accounts: AccountService,
    private readonly policies: PolicyService,
    private readonly approvals: ApprovalService,
    private readonly issuer: CardIssuer,
  ) {}

  private get repo() {
    return fastRepository(this.deps.ds, CardEntity);
  }

  /** Order of checks (DESIGN 3.4): setup → policy maximum → approval → hold and mint. */
  async create(p: Principal, input: CreateCardInput, creationKey?: string): Promise<CreateCardResult> {
    // Both reads at once (one round trip on MySQL); the checks keep their order.
    const [account, base] = await Promise.all([this.accounts.get(p.accountId), this.policies.read(p)]);
    assertSetup(account, this.deps.config.publicUrl);
    const policy = effectivePolicy(base, input.policy_override);
    assertPolicy(policy, input.amount_cents);
    const fields = { amountCents: input.amount_cents, agentId: input.agent_id ?? null, purpose: input.purpose ?? null };
    if (policy.approval_required) {
      const approval = await this.approvals.request(p, {
        ...fields,
        overrideMax: input.policy_override?.max_amount_cents ?? null,
        creationKey: creationKey ?? null,
      });
      return { kind: "pending", approval };
    }
    return { kind: "card", card: await this.issuer.issue(p, account, { ...fields, creationKey: creationKey ?? null }) };
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
      filters.status === undefined && filters.agent_id === undefined ? "ix_cards_list" : undefined,
    );
  }

  async find(p: Principal, id: string): Promise<Card> {
    const card = await this.repo.findOneBy({ id, account_id: p.accountId, mode: p.mode, status: In(VISIBLE) });
    if (!card) throw notFound("card");
    return card;
  }

  /** The card and a fresh ephemeral key secret for the processor's client-side reveal. */
  async reveal(p: Principal, id: string, nonce?: string): Promise<{ card: Card; ephemeralKeySecret: string }> {
    const card = await this.find(p, id);
    const processor = this.deps.processors(p.mode);
    const account = await this.accounts.get(p.accountId);
    const key = await callProcessor("ephemeral_key", this.deps.config.processorTimeoutMs, () =>
      processor.createEphemeralKey(processorAccount(account, p.mode), card.processor_card_id!, nonce),
    ).catch((err) => {
      throw toApiError(err);
    });
    return { card, ephemeralKeySecret: key.secret };
  }

  /**
   * Closes a card: CLOSED is claimed first with a conditional update (so a racing purchase either
   * wins before it or is declined after it), then the card is revoked and its hold cancelled.
   * If the processor fails, the card stays CLOSED and a retry or the recovery pass finishes it.
   */
  async close(p: Principal, id: string): Promise<Card> {
    let card = await this.find(p, id);
    if (card.status === "USED")
      throw new AppError(409, "card_not_open", "This card was already used; it is deactivated and cannot be closed.", { status: "USED" });
    if (card.status === "OPEN") {
      this.deps.processors(p.mode);
      const res = await this.repo.update({ id, status: "OPEN" }, { status: "CLOSED", closed_at: Date.now() });
      card = await this.find(p, id);
      if (affected(res) !== 1 && card.status === "USED")
        throw new AppError(409, "card_not_open", "This card was used before it could be closed.", { status: "USED" });
    }
    await this.finishClose(card);
    return card;
  }

  /** Revokes a CLOSED card at the processor and cancels its hold; each step runs once. */
  async finishClose(card: Card): Promise<void> {
    if (card.revoked_at !== null && card.hold_status !== "OPEN") return;
    const via = await this.processorFor(card);
    try {
      if (card.revoked_at === null) await this.revoke(card, via);
      if (card.hold_status === "OPEN") await this.issuer.releaseHold(card, via.pa, via.processor);
    } catch (err) {
      throw toApiError(err);
    }
  }

  /**
   * The test helper's purchase (test keys only): the same path as a purchase the processor reports,
   * scoped to the caller's account. A capture failure undoes it (502): no network approved it yet.
   */
  async purchase(p: Principal, id: string, amountCents: number): Promise<PurchaseResult> {
    const card = await this.find(p, id);
    return this.applyPurchase(card, amountCents, { onCaptureFailure: "undo", settle: "now" });
  }

  /**
   * A purchase the processor reports (Stripe issuing webhooks), without a principal: the card is
   * found by the processor's card id (or our card id from its metadata) within the event's mode.
   * The network has approved it, so it stands even if the capture fails (the recovery pass retries).
   * `settle: "later"` answers at once and captures and revokes afterwards (synchronous webhooks
   * have a deadline). Null when the card is unknown. Repeats are harmless: a USED card is declined
   * (card_not_open) and only its unfinished settlement is retried.
   */
  async purchaseFromProcessor(
    ref: { mode: Mode; processorCardId: string; cardId?: string },
    amountCents: number,
    settle: "now" | "later",
  ): Promise<PurchaseResult | null> {
    let card = await this.repo.findOneBy({ processor_card_id: ref.processorCardId, mode: ref.mode });
    if (!card && ref.cardId) card = await this.repo.findOneBy({ id: ref.cardId, mode: ref.mode });
    if (!card) return null;
    if (card.status === "USED" && settle === "now" && (card.hold_status === "OPEN" || card.revoked_at === null))
      await this.settleUsed(card).catch(() => undefined);
    return this.applyPurchase(card, amountCents, { onCaptureFailure: "keep", settle });
  }

  /**
   * The one purchase path. Single use: the first purchase within remaining_cents is approved, the
   * card becomes USED (a conditional update, so concurrent purchases and closes have one winner),
   * the hold is captured for the purchase amount (the rest released) and the card deactivated.
   */
  private async applyPurchase(
    card: Card,
    amountCents: number,
    opts: { onCaptureFailure: "undo" | "keep"; settle: "now" | "later" },
  ): Promise<PurchaseResult> {
    const id = card.id;
    const decline = (reason: string, c: Card = card): PurchaseResult => ({ approved: false, decline_reason: reason, amount_cents: amountCents, card: c });
    if (card.status !== "OPEN") return decline("card_not_open");
    if (amountCents > card.remaining_cents) return decline("amount_exceeds_remaining");
    const res = await this.repo
      .createQueryBuilder()
      .update()
      .set({ status: "USED", spent_cents: amountCents, remaining_cents: 0, used_at: Date.now() })
      .where("id = :id AND status = 'OPEN' AND remaining_cents >= :amount", { id, amount: amountCents })
      .execute();
    card = (await this.repo.findOneBy({ id }))!;
    if (affected(res) !== 1) return decline(card.status === "OPEN" ? "amount_exceeds_remaining" : "card_not_open", card);
    const approved = async (): Promise<PurchaseResult> => ({
      approved: true,
      decline_reason: null,
      amount_cents: amountCents,
      card: (await this.repo.findOneBy({ id }))!,
    });
    if (opts.settle === "later") {
      // Capture and deactivation after the answer; the recovery pass finishes them if this fails.
      const used = card;
      setImmediate(() => void this.settleUsed(used).catch(() => undefined));
      return approved();
    }
    let via: ProcessorOf;
    try {
      via = await this.processorFor(card);
      await this.capture(card, via);
    } catch (err) {
      if (opts.onCaptureFailure === "keep") return approved(); // the recovery pass captures it
      // No money moved: the purchase is undone and the card stays OPEN with its hold.
      await this.repo.update(
        { id, status: "USED", hold_status: "OPEN" },
        { status: "OPEN", remaining_cents: card.amount_cents, spent_cents: 0, used_at: null },
      );
      throw toApiError(err);
    }
    // Deactivating the spent card may be retried by the recovery pass; the purchase stands.
    await this.settleUsed({ ...card, hold_status: "CAPTURED" }, via).catch(() => undefined);
    return approved();
  }

  /** The card's processor and the processor's view of the card's account. */
  private async processorFor(card: Card): Promise<ProcessorOf> {
    const processor = this.deps.processors(card.mode);
    return { processor, pa: processorAccount(await this.accounts.get(card.account_id), card.mode) };
  }

  /** Captures a USED card's hold for what was spent; the rest of the hold is released. */
  private async capture(card: Card, { processor, pa }: ProcessorOf): Promise<void> {
    if (card.hold_status !== "OPEN") return;
    await callProcessor("capture", this.deps.config.processorTimeoutMs, () =>
      processor.captureHold(pa, card.hold_id!, card.spent_cents, `${card.id}:capture`),
    );
    await this.repo.update({ id: card.id, hold_status: "OPEN" }, { hold_status: "CAPTURED" });
  }

  /** Cancels the card at the processor (idempotent there too) and records it once. */
  private async revoke(card: Card, { processor, pa }: ProcessorOf): Promise<void> {
    await callProcessor("revoke", this.deps.config.processorTimeoutMs, () =>
      processor.revokeCard(pa, card.processor_card_id!, `${card.id}:revoke`),
    );
    await this.repo.update({ id: card.id, revoked_at: IsNull() }, { revoked_at: Date.now() });
  }

  /** Captures a USED card's hold (if still open) and deactivates the card; the recovery pass retries. */
  async settleUsed(card: Card, via?: ProcessorOf): Promise<void> {
    if (card.hold_status !== "OPEN" && card.revoked_at !== null) return;
    via ??= await this.processorFor(card);
    await this.capture(card, via);
    if (card.revoked_at === null) await this.revoke(card, via);
  }

  /** Recovery: finishes the processor side of CLOSED, USED and FAILED cards left half done. */
  async settleLeftovers(): Promise<number> {
    const rows = await this.repo.find({
      where: [
        { status: "CLOSED", revoked_at: IsNull() },
        { status: In(["CLOSED", "FAILED"]), hold_status: In(["OPEN", "PENDING"]) },
        { status: "USED", hold_status: "OPEN" },
        { status: "USED", revoked_at: IsNull(), processor_card_id: Not(IsNull()) },
      ],
      take: 100,
    });
    let n = 0;
    for (const card of rows) {
      try {
        if (card.status === "USED") await this.settleUsed(card);
        else if (card.status === "CLOSED") await this.finishClose(card);
        else {
          const account = await this.accounts.get(card.account_id);
          await this.issuer.releaseHold(card, processorAccount(account, card.mode), this.deps.processors(card.mode));
        }
        n++;
      } catch {
        // Left for the next pass.
      }
    }
    return n;
  }

  /** The spend summary (GET /v1/balance): money held, open cards, pending approvals, the policy's limits. */
  async balance(p: Principal) {
    // One fixed SQL string for the money (TypeORM's query builder would rebuild it on every call).
    const [[row], pending, policy, account] = await Promise.all([
      queryRows(this.deps.ds, BALANCE_SQL, [p.accountId, p.mode, p.accountId, p.mode]) as Promise<{ held: string | number; open: string | number }[]>,
      this.approvals.countPending(p),
      this.policies.read(p),
      this.accounts.get(p.accountId),
    ]);
    return {
      held_cents: Number(row?.held ?? 0),
      open_cards: Number(row?.open ?? 0),
      pending_approvals: pending,
      max_per_card_cents: policy.max_amount_cents,
      approval_required: policy.approval_required,
      setup_complete: missingSetup(account).length === 0,
    };
  }
}
