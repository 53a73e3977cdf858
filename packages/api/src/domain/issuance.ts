import { In, IsNull, LessThan } from "typeorm";
import { affected, isUniqueViolation } from "../db/datasource.js";
import { ApprovalEntity, CardEntity, type Account, type Card } from "../db/entities.js";
import { AccountSetupError, PaymentDeclinedError, type CardRefs, type Processor, type ProcessorAccount } from "../processor/types.js";
import type { Deps, Principal } from "./deps.js";
import { AppError } from "./errors.js";
import { newId, randomToken } from "./ids.js";
import { callProcessor, toApiError } from "./processor-call.js";
import { fastRepository, insertedId, runAtomically, type Statement } from "../db/fast.js";
import { commitWithEvents, actorOf, holdEvent, SYSTEM, type Actor, type NewEvent } from "./events.js";
import { approvalView, cardListView } from "./views.js";

const stillRunning = () => new AppError(409, "idempotency_key_in_use", "A request with this Idempotency-Key is still running; retry shortly.");

export interface IssueRequest {
  cardId?: string;
  amountCents: number;
  agentId: string | null;
  purpose: string | null;
  approvalId?: string;
  /** `<key id>:<Idempotency-Key>`: a retry of the same request finds the card it made. */
  creationKey?: string | null;
}

/** What finds the processor's objects made for a card: its id and creation time. */
export const cardRefs = (card: Card): CardRefs => ({ cardId: card.id, createdAt: card.created_at });

export const processorAccount = (account: Account, mode: Principal["mode"]): ProcessorAccount => ({
  accountId: account.id,
  mode,
  paymentMethod: account.payment_method ?? "",
});

/**
 * Places the hold and mints the card (DESIGN 3.5). The card row is written first, in CREATING
 * with its hold PENDING (the insert is the intent record), and every processor call carries a key
 * derived from the card id, so a crash at any point is finished by the recovery pass, or
 * compensated, and never yields a second hold or card.
 */
/**
 * A CREATING card as this attempt holds it: its lease as the attempt wrote it (at insert, or at
 * its takeover). An attempt whose lease ran out and was taken over cannot fail the card: its FAILED
 * would end the work of the attempt that holds the card now (and say no card of it is live while
 * that one mints).
 */
const owned = (card: Card) => ({ id: card.id, status: "CREATING" as const, ...(card.lease_until !== null ? { lease_until: card.lease_until } : {}) });

export class CardIssuer {
  constructor(private readonly deps: Deps) {}

  private get cards() {
    return fastRepository(this.deps.ds, CardEntity);
  }
  private get approvals() {
    return fastRepository(this.deps.ds, ApprovalEntity);
  }

  async issue(p: Principal, account: Account, req: IssueRequest): Promise<Card> {
    return (await this.start(p, account, req))!;
  }

  /**
   * Issues the card of an approval: `claim` (the approval's conditional update to APPROVED with
   * this card id) commits in one transaction with the card's intent record, so no approval is ever
   * APPROVED without its card. Null when the claim missed (the approval is no longer PENDING).
   */
  issueClaimed(p: Principal, account: Account, req: IssueRequest, claim: (cardId: string) => Statement): Promise<Card | null> {
    return this.start(p, account, req, claim);
  }

  private async start(p: Principal, account: Account, req: IssueRequest, claim?: (cardId: string) => Statement): Promise<Card | null> {
    const processor = this.deps.processors(p.mode);
    const now = Date.now();
    const row: Omit<Card, "seq"> = {
      id: req.cardId ?? newId("card"),
      account_id: p.accountId,
      mode: p.mode,
      status: "CREATING",
      amount_cents: req.amountCents,
      remaining_cents: req.amountCents,
      spent_cents: 0,
      ledger_version: 0,
      agent_id: req.agentId,
      purpose: req.purpose,
      last_four: null,
      expiration: null,
      processor_card_id: null,
      hold_id: null,
      // Intent first: PENDING means "a hold may exist under this card's key".
      hold_status: "PENDING",
      approval_id: req.approvalId ?? null,
      creation_key: req.creationKey ?? null,
      lease_until: now + this.deps.config.creationLeaseMs,
      expires_at: now + this.deps.config.cardTtlMs,
      revoked_at: null,
      created_at: now,
      closed_at: null,
      used_at: null,
      used_key: null,
      recovery_attempts: 0,
      recovery_next_at: null,
      recovery_error: null,
      needs_attention: false,
    };
    let seq: number;
    try {
      if (claim) {
        const done = await runAtomically(this.deps.ds, [claim(row.id), this.cards.insertStatement(row)]);
        if (!done) return null;
        seq = insertedId(done[1]!);
      } else seq = (await this.cards.insert(row)).identifiers[0]!.seq as number;
    } catch (err) {
      if (!isUniqueViolation(err)) throw err;
      return this.resumeCreation(p, account, req, claim);
    }
    return this.drive({ ...row, seq }, account, processor, actorOf(p));
  }

  /**
   * A request retried after its first attempt made a card row (found by its creation key): answer
   * from that row's state. A FAILED attempt (fully compensated) is set aside and the request runs
   * afresh under new ids.
   */
  private async resumeCreation(p: Principal, account: Account, req: IssueRequest, claim?: (cardId: string) => Statement): Promise<Card | null> {
    const existing = req.creationKey ? await this.cards.findOneBy({ creation_key: req.creationKey }) : null;
    if (!existing) throw stillRunning();
    if (existing.status === "FAILED") {
      await this.setAside(existing, account);
      return this.start(p, account, { ...req, cardId: undefined }, claim);
    }
    return this.finish(existing, account, actorOf(p));
  }

  /**
   * The card of a retried request, finished if it is still CREATING and its request died; null if
   * it failed (a failed card has already given its approval back).
   */
  async resume(account: Account, cardId: string, actor: Actor): Promise<Card | null> {
    const card = await this.cards.findOneBy({ id: cardId });
    if (!card || card.status === "FAILED") return null;
    return this.finish(card, account, actor);
  }

  private async finish(card: Card, account: Account, actor: Actor): Promise<Card> {
    if (card.status !== "CREATING") return card;
    if (!(await this.claim(card))) throw stillRunning();
    return (await this.drive(card, account, this.deps.processors(card.mode), actor, true))!;
  }

  /** A FAILED card's hold is released (if it may have one) and its creation key freed for a new attempt. */
  private async setAside(card: Card, account: Account): Promise<void> {
    if (card.hold_status === "PENDING" || card.hold_status === "OPEN")
      await this.releaseHold(card, processorAccount(account, card.mode), this.deps.processors(card.mode)).catch((err) => {
        throw toApiError(err);
      });
    await this.cards.update({ id: card.id, status: "FAILED" }, { creation_key: null });
  }

  /**
   * Takes over a CREATING row whose lease ran out (its request died); false if another holds it.
   * The card read takes the new lease: it is this attempt's fencing token (see `owned`).
   */
  private async claim(card: Card): Promise<boolean> {
    const now = Date.now();
    const until = now + this.deps.config.creationLeaseMs;
    const res = await this.cards.update({ id: card.id, status: "CREATING", lease_until: LessThan(now) }, { lease_until: until });
    if (affected(res) !== 1) return false;
    card.lease_until = until;
    return true;
  }

  /**
   * Moves a CREATING card forward from whatever step it reached: hold, then mint, then OPEN. A
   * card taken over from a request that died (`resumed`) may have a hold already, or a first
   * attempt whose answer the processor stored as a failure: its hold is looked up first, and only
   * if there is none is it placed, under a key of this attempt's own (the first one's may replay
   * that failure forever, or belong to other parameters).
   */
  private async drive(card: Card, account: Account, processor: Processor, actor: Actor, resumed = false): Promise<Card> {
    const pa = processorAccount(account, card.mode);
    const timeout = this.deps.config.processorTimeoutMs;
    if (card.hold_status === "NONE" || card.hold_status === "PENDING") {
      // Rows written before holds were recorded as PENDING at insert get their intent first.
      if (card.hold_status === "NONE") await this.cards.update({ id: card.id, status: "CREATING" }, { hold_status: "PENDING" });
      try {
        const found = resumed ? (await callProcessor("hold", timeout, (signal) => processor.findHolds(pa, cardRefs(card), signal))).find((h) => h.status === "held") : undefined;
        const key = resumed ? `${card.id}:hold:${randomToken(8)}` : `${card.id}:hold`;
        if (!found) await this.deps.beforeHold?.(card.id);
        const { holdId } =
          found ?? await callProcessor("hold", timeout, (signal) => processor.placeHold(pa, card.amount_cents, cardRefs(card), key, signal));
        // Written with the card's next update (OPEN or FAILED): until then PENDING already says
        // "a hold may exist under this card's key", which is all recovery needs to find it.
        card.hold_id = holdId;
        card.hold_status = "OPEN";
      } catch (err) {
        // A decline is definite: no hold exists. Anything else may have left one; release it.
        // No mint was tried, unless by the attempt this one took over.
        await this.fail(card, pa, processor, err instanceof PaymentDeclinedError ? "NONE" : "PENDING", resumed ? "unknown" : "none");
        throw toApiError(err);
      }
    }
    await this.deps.afterHold?.(card.id);
    let minted;
    try {
      // Taken over: the first attempt may have minted (found by reading), or its key may replay a
      // failure or carry another cardholder; a new mint goes under a key of this attempt's own.
      const found = resumed ? (await callProcessor("mint", timeout, (signal) => processor.findCards(pa, cardRefs(card), signal)))[0] : undefined;
      const key = resumed ? `${card.id}:mint:${randomToken(8)}` : `${card.id}:mint`;
      minted =
        found ?? (await callProcessor("mint", timeout, (signal) => processor.mintCard(pa, { ...cardRefs(card), amountCents: card.amount_cents, agentId: card.agent_id }, key, signal)));
    } catch (err) {
      // A refused set-up is definite (nothing was made); any other failure may hide a card.
      const mint = err instanceof AccountSetupError && !resumed ? "none" : "unknown";
      // A card of ours found by lookup after another attempt finished the row could be that attempt's.
      if ((await this.fail(card, pa, processor, "OPEN", mint)) && mint === "unknown") await this.revokeLostMint(card, pa, processor).catch(() => undefined);
      throw toApiError(err);
    }
    const opened: Card = {
      ...card,
      status: "OPEN",
      hold_status: "OPEN",
      processor_card_id: minted.processorCardId,
      last_four: minted.lastFour,
      expiration: minted.expiration,
      lease_until: null,
    };
    const scope = { accountId: card.account_id, mode: card.mode, actor };
    // An approval's decision is announced with its card: until the card is OPEN, a failed mint gives the approval back.
    const approval = card.approval_id ? await this.approvals.findOneBy({ id: card.approval_id }) : null;
    const events: NewEvent[] = [
      ...(approval ? [{ ...scope, type: "approval.approved" as const, object: approvalView(approval) }] : []),
      { ...scope, type: "card.created", object: cardListView(opened) },
    ];
    const done = await commitWithEvents(this.deps.ds, [
      // First to finish wins (whoever holds the lease): the other one undoes its own (undoBeside).
      this.cards.updateStatement(
        { id: card.id, status: "CREATING" },
        {
          status: "OPEN",
          hold_id: card.hold_id,
          hold_status: "OPEN",
          processor_card_id: minted.processorCardId,
          last_four: minted.lastFour,
          expiration: minted.expiration,
          lease_until: null,
          // Made at last: the failures of its creation are behind it, and count against none of its follow-ups (close, expiry).
          recovery_attempts: 0,
          recovery_next_at: null,
          recovery_error: null,
          needs_attention: false,
        },
        1,
      ),
    ], events);
    if (done) return opened;
    // Another attempt finished the card while this one was at the processor: its answer stands.
    const final = await this.undoBeside(card, pa, processor, minted.processorCardId);
    if (final.status === "OPEN") return final;
    throw new AppError(502, "processor_error", "The card processor was too slow; the request was rolled back and nothing is held.");
  }

  /**
   * Compensation: the card becomes FAILED and any hold it may have is cancelled (false, and nothing
   * of the card's touched, when another attempt finished the card first). If cancelling
   * fails too, the hold stays marked and the recovery pass retries it. `mint` says whether a card
   * may have been minted for it: if none was, no card of it can be live (revoked_at). A hold or a
   * card whose creation's outcome is unknown (PENDING; `mint` unknown) is looked up now and again
   * by the recovery pass a creation lease later, when a call still running at the processor has
   * ended (see releaseHold, revokeLostMint).
   */
  private async fail(card: Card, pa: ProcessorAccount, processor: Processor, holdStatus: "NONE" | "PENDING" | "OPEN", mint: "none" | "unknown"): Promise<boolean> {
    const now = Date.now();
    const failed = this.cards.updateStatement(
      owned(card),
      {
        status: "FAILED",
        hold_id: card.hold_id,
        hold_status: holdStatus,
        lease_until: null,
        approval_id: null,
        ...(mint === "none" ? { revoked_at: now } : {}),
        ...(mint === "unknown" || holdStatus === "PENDING" ? { recovery_next_at: now + this.deps.config.creationLeaseMs } : {}),
      },
    );
    // The approval goes back to PENDING in the same transaction: never APPROVED without a card.
    const released = card.approval_id
      ? [this.approvals.updateStatement({ id: card.approval_id, status: "APPROVED", card_id: card.id }, { status: "PENDING", card_id: null, decided_at: null })]
      : [];
    if (await runAtomically(this.deps.ds, [{ ...failed, expect: 1 }, ...released])) {
      if (holdStatus !== "NONE") await this.releaseHold({ ...card, hold_status: holdStatus }, pa, processor).catch(() => undefined);
      return true;
    }
    // Another attempt (one that took over after this one's lease ran out) finished the card first:
    // the card and its approval are that attempt's; only a hold this one placed beside it is undone.
    await this.undoBeside(card, pa, processor, null);
    return false;
  }

  /**
   * An attempt that lost its card to another (which finished it OPEN or FAILED after this one's
   * lease ran out) takes back what was made for the card that the card does not hold: its own
   * processor card and hold, and any whose creation's outcome is unknown here (an answer lost, or
   * made after the other attempt's lookups), found by reading the processor.
   */
  private async undoBeside(card: Card, pa: ProcessorAccount, processor: Processor, mintedCardId: string | null): Promise<Card> {
    const timeout = this.deps.config.processorTimeoutMs;
    const final = (await this.cards.findOneBy({ id: card.id }))!;
    // Still being made by the attempt that took it over: what this one made is that one's to find
    // (its lookups find a hold or a card of the card's), and may be what it uses.
    if (final.status === "CREATING") return final;
    const [holds, minted] = await Promise.all([
      callProcessor("hold", timeout, (signal) => processor.findHolds(pa, cardRefs(card), signal)).catch(() => []),
      callProcessor("mint", timeout, (signal) => processor.findCards(pa, cardRefs(card), signal)).catch(() => []),
    ]);
    const cardIds = new Set([...(mintedCardId ? [mintedCardId] : []), ...minted.map((m) => m.processorCardId)]);
    cardIds.delete(final.processor_card_id!);
    for (const id of cardIds) await callProcessor("revoke", timeout, (signal) => processor.revokeCard(pa, id, `${card.id}:revoke:${id}`, signal)).catch(() => undefined);
    // The final card's hold is kept by an OPEN card and cancelled by a FAILED one's releaseHold; every
    // other hold found is left over and cancelled here, as is this attempt's own unless an OPEN card
    // holds it (a FAILED card's hold cancelled twice is still cancelled once).
    const ourHold = card.hold_status === "OPEN" && (card.hold_id !== final.hold_id || final.status === "FAILED") ? [card.hold_id!] : [];
    const holdIds = new Set([...ourHold, ...holds.filter((h) => h.status === "held" && h.holdId !== final.hold_id).map((h) => h.holdId)]);
    for (const id of holdIds) await callProcessor("cancel", timeout, (signal) => processor.cancelHold(pa, id, `${card.id}:cancel:${id}`, signal)).catch(() => undefined);
    return final;
  }

  /**
   * Cancels a card's hold if it has (or may have) one. A PENDING hold (its creation's outcome
   * unknown) is looked up at the processor, never created again to find it. Finding none is
   * `final` only for the recovery pass, a creation lease after the failure: before that the call
   * that timed out may still be placing the hold, so the card stays PENDING for that pass.
   */
  async releaseHold(card: Card, pa: ProcessorAccount, processor: Processor, actor: Actor = SYSTEM, final = false): Promise<void> {
    const timeout = this.deps.config.processorTimeoutMs;
    let holdId = card.hold_id;
    if (card.hold_status === "PENDING") {
      // Every hold found is cancelled: more than one when an attempt outlived its lease.
      const found = await callProcessor("hold", timeout, (signal) => processor.findHolds(pa, cardRefs(card), signal));
      if (found.length === 0 && !final) return;
      const held = found.filter((h) => h.status === "held").map((h) => h.holdId);
      for (const id of held) await callProcessor("cancel", timeout, (signal) => processor.cancelHold(pa, id, `${card.id}:cancel:${id}`, signal));
      holdId = held[0] ?? null;
    } else if (holdId) await callProcessor("cancel", timeout, (signal) => processor.cancelHold(pa, holdId!, `${card.id}:cancel`, signal));
    // Announced for cards the API shows; a failed creation's hold was never the owner's to see.
    const visible = holdId !== null && (card.status === "OPEN" || card.status === "USED" || card.status === "CLOSED");
    await commitWithEvents(
      this.deps.ds,
      [this.cards.updateStatement({ id: card.id, hold_status: In(["PENDING", "OPEN"]) }, { hold_id: holdId, hold_status: "RELEASED" }, 1)],
      visible ? [holdEvent(card, 0, actor)] : [],
    );
  }

  /**
   * A mint that failed or timed out may still have made a card at the processor: its answer was
   * lost, or the call is still running there and makes the card later. It is looked up, never
   * created again to find it, and revoked: no card ever lives without a hold. revoked_at then says
   * no card of ours can be live there. A lookup that finds nothing is `final` only when the
   * recovery pass makes it, a creation lease after the failure (a call still running at the
   * processor has ended by then); the failing request's own lookup leaves the card to that one.
   */
  async revokeLostMint(card: Card, pa: ProcessorAccount, processor: Processor, final = false): Promise<void> {
    const timeout = this.deps.config.processorTimeoutMs;
    const minted = await callProcessor("mint", timeout, (signal) => processor.findCards(pa, cardRefs(card), signal));
    for (const { processorCardId: id } of minted) await callProcessor("revoke", timeout, (signal) => processor.revokeCard(pa, id, `${card.id}:revoke:${id}`, signal));
    if (minted.length > 0 || final)
      await this.cards.update({ id: card.id, status: "FAILED", revoked_at: IsNull() }, { processor_card_id: minted[0]?.processorCardId ?? null, revoked_at: Date.now() });
  }

  /**
   * Recovery: finishes cards whose request died mid-way (lease expired), but those left to an
   * operator. A card that could not even be driven (its mode's processor unconfigured since, its
   * account unreadable) and is still CREATING is a failed attempt (`failed`: counted, and after
   * too many, listed for the operator); one card's failure never stops the pass.
   */
  async recoverStuck(accountOf: (id: string) => Promise<Account>, failed: (card: Card, error: string) => Promise<void>): Promise<number> {
    const stuck = await this.cards.findWhereSql("status = 'CREATING' AND lease_until < ? AND needs_attention = 0", [Date.now()], " LIMIT 100");
    let n = 0;
    for (const card of stuck) {
      if (!(await this.claim(card))) continue;
      const finish = async () => this.drive(card, await accountOf(card.account_id), this.deps.processors(card.mode), SYSTEM, true);
      await finish().catch(async (err) => {
        const now = (await this.cards.findOneBy({ id: card.id }))!;
        if (now.status === "CREATING") await failed(now, err instanceof Error ? err.message : String(err));
      });
      n++;
    }
    return n;
  }
}
