import { sha256 } from "./secrets.js";
import { In, IsNull, LessThan, MoreThan, type FindOptionsWhere } from "typeorm";
import { isUniqueViolation } from "../db/datasource.js";
import {
  AuthorizationEntity,
  CardEntity,
  TransactionEntity,
  type Authorization,
  type Card,
  type Mode,
  type Payment,
  type Transaction,
} from "../db/entities.js";
import { fastRepository, insertedId, type Statement } from "../db/fast.js";
import type { AccountService } from "./accounts.js";
import { DUE_FOR_RECOVERY, EXPIRED_USED, type CardService } from "./cards.js";
import { processorAccount } from "./issuance.js";
import { callProcessor, toApiError } from "./processor-call.js";
import type { Deps, Principal } from "./deps.js";
import { AppError, notFound } from "./errors.js";
import { newId } from "./ids.js";
import { pageOf, type Page, type PageQuery } from "./paging.js";
import type { NewPayment, PaymentQueue } from "./payments.js";
import { commitWithEvents, holdEvent, PROCESSOR, SYSTEM, type NewEvent } from "./events.js";
import { authorizationView, cardListView, transactionView } from "./views.js";

export interface Merchant {
  name?: string | null;
  category?: string | null;
  country?: string | null;
}

export interface AuthorizationRequest {
  amountCents: number;
  merchant?: Merchant;
  /** The processor's id of the authorization: a repeat of it gets the first decision. */
  processorAuthorizationId?: string;
  /** The request (idempotency scope) asking, kept on the card it uses (retries answer alike). */
  usedKey?: string;
  /** The processor's final answer was a decline before we decided: recorded as `processor_declined`. */
  processorDeclined?: boolean;
}

export interface SettleRequest {
  amountCents: number;
  authorizationId?: string | null;
  processorTransactionId?: string;
  merchantName?: string | null;
}

/** Authorizations of a card approved and pending, but the one given (params: card id, authorization id). */
const OTHER_PENDING = "card_id = ? AND status = 'pending' AND approved = 1 AND id <> ?";
/** A cards condition: no other authorization of the card is pending (OTHER_PENDING's params). */
const NO_OTHER_PENDING = `NOT EXISTS (SELECT 1 FROM authorizations WHERE ${OTHER_PENDING})`;

/**
 * The transaction id a test helper's capture or refund is recorded under when its request carries
 * an Idempotency-Key (`scope`, the key's claim, kept by a retry that takes the key over): a retry
 * after the first attempt committed but did not answer finds its transaction instead of recording
 * a second one (a second capture would be charged off-session). Hashed to fit the column.
 */
export const requestTransactionId = (scope: string | undefined) => (scope === undefined ? undefined : `request:${sha256(scope)}`);

/** The test helpers' capture of an authorization that gave its card back (reversed, expired): none. */
const notCapturable = (a: Authorization) =>
  new AppError(409, "authorization_not_capturable", `Authorization ${a.id} was ${a.status}; it cannot be captured.`, { status: a.status });

/** The test helpers' refund beyond what may still be refunded. */
const refundExceeds = (refundable: number) =>
  new AppError(409, "refund_exceeds_capture", `Only ${Math.max(refundable, 0)} of this capture can still be refunded.`, { refundable_cents: Math.max(refundable, 0) });

export type DeclineReason = "card_not_open" | "card_expired" | "hold_not_in_force" | "amount_exceeds_remaining" | "processor_declined";

/** Why a card may not take an authorization of `amount` now; null if it may. */
function declineReason(card: Card, amount: number, now: number): DeclineReason | null {
  if (card.status !== "OPEN") return "card_not_open";
  if (card.expires_at <= now) return "card_expired";
  if (card.hold_status !== "OPEN") return "hold_not_in_force";
  if (amount > card.remaining_cents) return "amount_exceeds_remaining";
  return null;
}

/** A transaction on a card, as recorded when the processor reports it. */
const transactionRow = (card: Card, type: Transaction["type"], req: SettleRequest): Omit<Transaction, "seq"> => ({
  id: newId("txn"),
  account_id: card.account_id,
  mode: card.mode,
  card_id: card.id,
  authorization_id: req.authorizationId ?? null,
  processor_transaction_id: req.processorTransactionId ?? null,
  type,
  amount_cents: req.amountCents,
  merchant_name: req.merchantName ?? null,
  refund_of: null,
  created_at: Date.now(),
});

/** What a transaction does to the card's money, planned from a reading of the card. */
interface LedgerPlan {
  payments: NewPayment[];
  steps: Statement[];
  events: NewEvent[];
}

/**
 * Which of a card's collections a refund draws on first: charges never collected (the refund
 * waives them), then those still being collected (the refund waits: it gives the money back if
 * it is collected, waives it if not), then what was collected, and last a collection that needs an
 * operator (so does a refund drawn on it). Collected money drawn before a charge still being
 * retried would leave that charge owed in full when it fails.
 */
const drawOrder = (p: Payment): number =>
  p.status === "uncollected" ? 0 : p.status === "pending" ? 1 : p.status === "succeeded" ? 2 : 3;

/**
 * The refund payments that give `amount` back from a card's collections (hold capture, charges),
 * in drawOrder, then in the order they were made, each never below what refunds drew on it already.
 */
function refundDraws(payments: Payment[], amount: number): NewPayment[] {
  const drawn = new Map<string, number>();
  for (const p of payments) if (p.refund_of) drawn.set(p.refund_of, (drawn.get(p.refund_of) ?? 0) + p.amount_cents);
  const sources = payments.filter((p) => p.kind !== "refund");
  const draws: NewPayment[] = [];
  let left = amount;
  for (const source of [0, 1, 2, 3].flatMap((rank) => sources.filter((p) => drawOrder(p) === rank))) {
    const take = Math.min(left, source.amount_cents - (drawn.get(source.id) ?? 0));
    if (take > 0) draws.push({ kind: "refund", amount_cents: take, refund_of: source.id });
    left -= Math.max(take, 0);
  }
  return draws;
}

/**
 * The card money lifecycle (DESIGN 3.6), the same for every processor: authorizations decided in
 * real time from the database only, settlement that moves money (capture of the hold for what
 * settled, the rest released, anything beyond it charged off-session), refunds back to the
 * customer, authorizations that never settle giving the card back, holds the processor canceled,
 * and card expiry. Every state change is a conditional update or a unique insert, so repeated and
 * out-of-order reports from the processor are harmless.
 */
export class CardLifecycle {
  constructor(
    private readonly deps: Deps,
    private readonly accounts: AccountService,
    private readonly cardService: CardService,
    private readonly payments: PaymentQueue,
  ) {}

  private get cards() {
    return fastRepository(this.deps.ds, CardEntity);
  }
  private get authorizations() {
    return fastRepository(this.deps.ds, AuthorizationEntity);
  }
  private get transactions() {
    return fastRepository(this.deps.ds, TransactionEntity);
  }

  // --- authorizations ---

  /**
   * Approves iff the card is OPEN, unexpired, its hold in force and the amount within
   * remaining_cents. A zero amount (card verification) is approved without using the card; the
   * first approved non-zero amount makes it USED (a conditional update, so one of many racing
   * authorizations wins). Every decision is recorded. A processor's authorization is recorded once
   * (its id is a unique key): when it is already recorded, or another request records it first,
   * that record is the answer (its transaction, the card's use included, rolls back): a caller
   * holding such an id need not look it up first, and a repeat costs one failed insert.
   */
  async authorize(card: Card, req: AuthorizationRequest): Promise<Authorization> {
    // A retry of the request that used the card (its Idempotency-Key's claim, the answer lost): what it made.
    if (req.usedKey !== undefined && card.status === "USED" && card.used_key === req.usedKey) {
      const earlier = await this.authorizations.findOne({ where: { card_id: card.id, consumed_card: true }, order: { created_at: "DESC" } });
      if (earlier) return earlier;
    }
    const now = Date.now();
    const row: Omit<Authorization, "seq"> = {
      id: newId("auth"),
      account_id: card.account_id,
      mode: card.mode,
      card_id: card.id,
      processor_authorization_id: req.processorAuthorizationId ?? null,
      amount_cents: req.amountCents,
      approved: false,
      decline_reason: req.processorDeclined ? "processor_declined" : declineReason(card, req.amountCents, now),
      status: "closed",
      merchant_name: req.merchant?.name ?? null,
      merchant_category: req.merchant?.category ?? null,
      merchant_country: req.merchant?.country ?? null,
      consumed_card: false,
      created_at: now,
      updated_at: now,
    };
    try {
      if (row.decline_reason === null && req.amountCents === 0) {
        // A verification: approved, nothing held for it, nothing will settle.
        return await this.record({ ...row, approved: true });
      }
      if (row.decline_reason === null) {
        const approved = { ...row, approved: true, status: "pending" as const, consumed_card: true };
        const use = this.use(card, { hold_status: "OPEN", expires_at: MoreThan(now), remaining_cents: MoreThan(req.amountCents - 1) }, now, req.usedKey);
        const done = await commitWithEvents(this.deps.ds, [use.step, this.authorizations.insertStatement(approved)], [
          this.event(card, "authorization.approved", authorizationView({ ...approved, seq: 0 })),
          use.event,
        ]);
        if (done) return { ...approved, seq: 0 };
        // Another authorization or a close won the card in between.
        const now2 = Date.now();
        const fresh = (await this.cards.findOneBy({ id: card.id }))!;
        row.decline_reason = declineReason(fresh, req.amountCents, now2) ?? "card_not_open";
      }
      return await this.record(row);
    } catch (err) {
      if (!isUniqueViolation(err) || !req.processorAuthorizationId) throw err;
      return (await this.authorizations.findOneBy({ processor_authorization_id: req.processorAuthorizationId }))!;
    }
  }

  /**
   * The step that spends an OPEN card (status USED, nothing remaining; `usedKey` is the request
   * using it), only while it is still OPEN and meets `guard`, with its card.used event.
   */
  private use(card: Card, guard: FindOptionsWhere<Card>, now: number, usedKey?: string): { step: Statement; event: NewEvent } {
    const change = { status: "USED" as const, remaining_cents: 0, used_at: now, used_key: usedKey ?? null };
    return {
      step: this.cards.updateStatement({ ...guard, id: card.id, status: "OPEN" }, change, 1),
      event: this.event(card, "card.used", cardListView({ ...card, ...change })),
    };
  }

  /** Records a decision that changes no card: a decline, or a verification (zero amount). */
  private async record(row: Omit<Authorization, "seq">): Promise<Authorization> {
    const auth = { ...row, seq: 0 };
    const type = row.approved ? "authorization.approved" : "authorization.declined";
    const res = await commitWithEvents(this.deps.ds, [this.authorizations.insertStatement(row)], [
      { accountId: row.account_id, mode: row.mode, type, object: authorizationView(auth), actor: PROCESSOR },
    ]);
    return { ...auth, seq: insertedId(res![0]!) };
  }

  /** An event of the processor's doing (unless `actor` says otherwise) about a row of an account. */
  private event(on: { account_id: string; mode: Mode }, type: NewEvent["type"], object: unknown, actor = PROCESSOR): NewEvent {
    return { accountId: on.account_id, mode: on.mode, type, object, actor };
  }

  /**
   * The answer for `amountCents` in all on a recorded authorization (Stripe asking again, or an
   * increment: a tip, a fuel pump's final amount). A decline stays one. An approval stands only
   * while nothing gave its card back since: pending on a hold still in force (a verification:
   * while the card may take one), whatever the amount was approved for; a higher total is
   * approved within the card's hold, and recorded. `card`: the card as read before the decision
   * (a fresh approval needs its hold in force, so it stands without another read).
   */
  async stillApproved(auth: Authorization, card: Card, amountCents: number): Promise<boolean> {
    if (!auth.approved) return false;
    if (auth.amount_cents === 0 && amountCents === 0) return declineReason(card, 0, Date.now()) === null;
    if (auth.status !== "pending" || card.hold_status !== "OPEN") return false;
    if (amountCents <= auth.amount_cents) return true;
    // More is ours to approve only on the authorization that used the card, before its expiry (one
    // the processor approved beside it, a stand-in, is the processor's: it gets no more from us).
    if (amountCents > card.amount_cents || !auth.consumed_card || card.expires_at <= Date.now()) return false;
    const res = await this.authorizations.update({ id: auth.id, status: "pending" }, { amount_cents: amountCents, updated_at: Date.now() });
    return (res.affected ?? 0) === 1;
  }

  /**
   * The processor's final answer approved what we declined (Stripe decides alone, by its timeout
   * setting, when our answer comes too late): its approval is the fact that money settles on. The
   * authorization becomes approved (pending, unless a verification or settled already) and spends
   * its card if the card is still OPEN, so a single-use card takes no second purchase after it; a
   * card no longer OPEN (another purchase, a settlement or a close came first) is left as it is.
   */
  async processorApproved(auth: Authorization): Promise<Authorization> {
    const now = Date.now();
    const card = (await this.cards.findOneBy({ id: auth.card_id }))!;
    // Settled already (Stripe does not promise the order of events): nothing of it is pending.
    const settled = (await this.transactions.findOneBy({ authorization_id: auth.id })) !== null;
    const approve = async (use: { step: Statement; event: NewEvent } | null) => {
      const status = auth.amount_cents === 0 || settled ? ("closed" as const) : ("pending" as const);
      const next = { approved: true, status, decline_reason: null, consumed_card: use !== null, updated_at: now };
      // Only while it is still the decline read (a decline always has its reason).
      const step = this.authorizations.updateStatement({ id: auth.id, decline_reason: auth.decline_reason ?? "" }, next, 1);
      const event = this.event(auth, "authorization.approved", authorizationView({ ...auth, ...next }));
      return commitWithEvents(this.deps.ds, use ? [step, use.step] : [step], use ? [event, use.event] : [event]);
    };
    // A card that changed since it was read keeps its state: the approval is recorded alone.
    if (!(card.status === "OPEN" && auth.amount_cents > 0 && (await approve(this.use(card, {}, now))))) await approve(null);
    return (await this.authorizations.findOneBy({ id: auth.id }))!;
  }

  /**
   * An authorization that will never settle: reversed by the merchant, expired unsettled, or
   * declined in the processor's final answer. If it made its card USED and nothing settled on it,
   * the card is OPEN again with its full remaining_cents; unless the card is past its expiry (or
   * was deactivated at it): then it is CLOSED as expired, and its hold released.
   */
  async release(auth: Authorization, outcome: "reversed" | "expired" | "declined"): Promise<Authorization> {
    const now = Date.now();
    const settled = await this.transactions.findOneBy({ authorization_id: auth.id });
    const next: Partial<Authorization> =
      outcome === "declined"
        ? { status: "closed", approved: false, decline_reason: auth.decline_reason ?? "processor_declined", updated_at: now }
        : { status: outcome, updated_at: now };
    const released = { ...auth, ...next };
    const steps: Statement[] = [this.authorizations.updateStatement({ id: auth.id, status: auth.status }, next, 1)];
    const events = outcome === "declined" ? [this.event(auth, "authorization.declined", authorizationView(released))] : [];
    // The card comes back with its event only if it is still USED and unsettled (expect 1);
    // otherwise the authorization's change commits alone.
    const card = auth.consumed_card && !settled ? (await this.cards.findOneBy({ id: auth.card_id }))! : null;
    if (card) {
      const lapsed = card.expires_at <= now || card.revoked_at !== null;
      const change: Partial<Card> = lapsed ? { status: "CLOSED", closed_at: now } : { status: "OPEN", remaining_cents: card.amount_cents, used_at: null, used_key: null };
      const after = { ...card, ...change };
      // Moves the ledger's version too: a settlement planned on the card still USED reads it again
      // (and spends the card again) instead of committing beside the card's return.
      const guarded = this.cards.updateStatement(
        { id: card.id, status: "USED", spent_cents: 0, ledger_version: card.ledger_version },
        { ...change, ledger_version: card.ledger_version + 1 },
        1,
      );
      // Not while another approved authorization is pending on the card (the processor approved it
      // beside ours, a stand-in approval): it settles on the hold, so the card stays USED.
      const reopen = { ...guarded, sql: `${guarded.sql} AND ${NO_OTHER_PENDING}`, params: [...guarded.params, card.id, auth.id] };
      const changed = await commitWithEvents(
        this.deps.ds,
        [...steps, reopen],
        [...events, lapsed ? this.event(card, "card.expired", cardListView(after), SYSTEM) : this.event(card, "card.reopened", cardListView(after))],
      );
      // An expired card's hold is released now (the recovery pass retries if the processor fails).
      if (changed && lapsed) await this.cardService.followUp(after);
      if (changed) return (await this.authorizations.findOneBy({ id: auth.id }))!;
    }
    // Such another pending authorization takes over the card's use: if it never settles either, its release gives the card back.
    const handOver = card
      ? [{ sql: `UPDATE authorizations SET consumed_card = 1 WHERE ${OTHER_PENDING}`, params: [card.id, auth.id] }]
      : [];
    await commitWithEvents(this.deps.ds, [...steps, ...handOver], events);
    return (await this.authorizations.findOneBy({ id: auth.id }))!;
  }

  // --- settlement and refunds ---

  /**
   * A capture settled: the customer owes its amount more (less a refund recorded before it, which
   * it nets). That is captured from the card's hold (the rest released in the same step) while the
   * hold is open; what is beyond the hold, or any capture after the hold's, is charged to the
   * payment method off-session as its own payment. The transaction, its payments and the card's
   * spent_cents commit together; the payments are then carried out (and retried from the queue).
   */
  async settle(card: Card, req: SettleRequest, o: { onlyCapturable?: boolean } = {}): Promise<Transaction> {
    const seen = await this.seenTransaction(req.processorTransactionId);
    if (seen) return seen;
    const txn = transactionRow(card, "capture", req);
    const recorded = await this.recordTransaction(card, txn, async (current) => {
      // The test helpers' capture (`onlyCapturable`) of an authorization that gave its card back
      // meanwhile is refused, read again at each attempt and guarded in its transaction; the
      // network's own captures are facts, recorded whatever came before them.
      const guarded = o.onlyCapturable && req.authorizationId ? req.authorizationId : null;
      if (guarded) {
        const auth = (await this.authorizations.findOneBy({ id: guarded }))!;
        if (auth.status !== "pending" && auth.status !== "closed") throw notCapturable(auth);
      }
      const due = Math.max(current.spent_cents + req.amountCents, 0) - Math.max(current.spent_cents, 0);
      // The hold settles once: whoever flips it OPEN → CAPTURED takes it (a loser reads again).
      // Nothing due of it (a refund netted the capture) captures 0: the hold is released whole.
      const holdOpen = current.hold_status === "OPEN";
      const fromHold = holdOpen ? Math.min(due, current.amount_cents) : 0;
      const payments: NewPayment[] = [
        ...(holdOpen ? [{ kind: "hold_capture" as const, amount_cents: fromHold, refund_of: null }] : []),
        ...(due > fromHold ? [{ kind: "charge" as const, amount_cents: due - fromHold, refund_of: null }] : []),
      ];
      const steps: Statement[] = [];
      const events: NewEvent[] = [];
      if (current.status === "OPEN") {
        // Settled with no authorization of ours using the card (a force capture, a capture before
        // its authorization is recorded or after it gave the card back): the card is spent.
        const use = this.use(current, {}, txn.created_at);
        steps.push(use.step);
        events.push(use.event);
      }
      // The hold's end is announced by its capture's payment, when the processor has made it (see PaymentQueue).
      if (holdOpen) steps.push(this.cards.updateStatement({ id: card.id, hold_status: "OPEN" }, { hold_status: "CAPTURED" }, 1));
      if (guarded) steps.push(this.authorizations.updateStatement({ id: guarded, status: In(["pending", "closed"]) }, { status: "closed", updated_at: txn.created_at }, 1));
      else if (req.authorizationId)
        steps.push(this.authorizations.updateStatement({ id: req.authorizationId, status: "pending" }, { status: "closed", updated_at: txn.created_at }));
      return { payments, steps, events };
    });
    await this.finishUse(card.id);
    return recorded;
  }

  /**
   * A refund from the merchant: the customer gets back what they were asked for of it, through the
   * card's collections: first what was never collected (waived), then the hold's capture and the
   * charges in order. A refund recorded before the capture it refunds is netted by that capture.
   */
  async refund(card: Card, req: Omit<SettleRequest, "authorizationId">, o: { ofCapture?: Transaction } = {}): Promise<Transaction> {
    const seen = await this.seenTransaction(req.processorTransactionId);
    if (seen) return seen;
    const capture = o.ofCapture;
    const txn = { ...transactionRow(card, "refund", req), refund_of: capture?.id ?? null };
    return this.recordTransaction(card, txn, async (current) => {
      // The test helpers' refund of a capture: never more than what its refunds left of it, nor
      // than the card's settlements left unrefunded, read again at each attempt (concurrent
      // refunds serialize on the card's ledger version, so a second one sees the first).
      if (capture) {
        const refunds = await this.transactions.find({ where: { card_id: card.id, refund_of: capture.id } });
        const left = capture.amount_cents - refunds.reduce((sum, r) => sum + r.amount_cents, 0);
        const refundable = Math.min(left, current.spent_cents);
        if (req.amountCents > refundable) throw refundExceeds(refundable);
      }
      const back = Math.max(current.spent_cents, 0) - Math.max(current.spent_cents - req.amountCents, 0);
      return { payments: refundDraws(await this.payments.ofCard(card.id), back), steps: [], events: [] };
    });
  }

  /**
   * Records a transaction with the payments `plan` makes from a reading of the card and moves the
   * card's spent_cents, only if nothing moved the card's money since that reading (its
   * ledger_version): concurrent settlements and refunds of one card each see the others' (a loser
   * reads the card again). Then carries out the payments. A transaction the processor reported
   * before (its id is unique) is answered as recorded then.
   */
  private async recordTransaction(card: Card, txn: Omit<Transaction, "seq">, plan: (current: Card) => LedgerPlan | Promise<LedgerPlan>): Promise<Transaction> {
    const delta = txn.type === "capture" ? txn.amount_cents : -txn.amount_cents;
    try {
      for (let current = card; ; current = (await this.cards.findOneBy({ id: card.id }))!) {
        const { payments, steps, events } = await plan(current);
        const intents = payments.map((p) => this.payments.intent(current, txn.id, p));
        const ledger: Statement = {
          sql: "UPDATE cards SET spent_cents = spent_cents + ?, ledger_version = ledger_version + 1 WHERE id = ? AND ledger_version = ?",
          params: [delta, card.id, current.ledger_version],
          expect: 1,
        };
        const committed = await commitWithEvents(
          this.deps.ds,
          [ledger, ...steps, this.transactions.insertStatement(txn), ...intents.map((i) => i.statement)],
          [this.event(card, "transaction.created", transactionView({ ...txn, seq: 0 })), ...events],
        );
        if (!committed) continue;
        await this.payments.run(intents.map((p) => p.id));
        return { ...txn, seq: 0 };
      }
    } catch (err) {
      const again = isUniqueViolation(err) ? await this.seenTransaction(txn.processor_transaction_id ?? undefined) : null;
      if (again) return again;
      throw err;
    }
  }

  private async seenTransaction(processorTransactionId: string | undefined): Promise<Transaction | null> {
    return processorTransactionId ? this.transactions.findOneBy({ processor_transaction_id: processorTransactionId }) : null;
  }

  /** A USED card whose authorizations are all settled or gone is deactivated at the processor. */
  private async finishUse(cardId: string): Promise<void> {
    const card = (await this.cards.findOneBy({ id: cardId }))!;
    if (card.status !== "USED" || card.revoked_at !== null) return;
    if (await this.authorizations.findOneBy({ card_id: cardId, status: "pending" })) return;
    await this.cardService.deactivate(card).catch(() => undefined); // the maintenance pass retries
  }

  // --- holds and expiry ---

  /**
   * The processor canceled the card's hold (it lapsed, or was canceled at the processor): nothing
   * may be approved on the card any more, so it is CLOSED and deactivated at once. A pending
   * authorization still settles, charged off-session since the hold is gone. The hold's end is
   * announced (hold.released, nothing captured) with the change that records it, on a card the
   * API shows, as a release of ours is: a closed card's hold may lapse before its release ran.
   */
  async holdCanceled(card: Card): Promise<Card> {
    const now = Date.now();
    const lapse = (expect?: number) => this.cards.updateStatement({ id: card.id, hold_status: "OPEN" }, { hold_status: "EXPIRED" }, expect);
    const released = holdEvent(card, 0);
    // The card is closed from the status read, with its event; if it changed meanwhile, read again.
    for (let current = card; ; current = (await this.cards.findOneBy({ id: card.id }))!) {
      // Settled meanwhile (a lapse reported against a card read before its capture was recorded):
      // its hold is captured in our books, and a capture the processor then refuses is charged
      // off-session (the payment queue); the card stays as it is.
      if (current.hold_status === "CAPTURED") break;
      const held = current.hold_status === "OPEN";
      if (current.status !== "OPEN" && current.status !== "USED") {
        if (held) await commitWithEvents(this.deps.ds, [lapse(1)], current.status === "CLOSED" ? [released] : []);
        break;
      }
      const close = this.cards.updateStatement({ id: card.id, status: current.status }, { status: "CLOSED", closed_at: now }, 1);
      const closedView = cardListView({ ...current, status: "CLOSED", closed_at: now });
      const events = [this.event(current, "card.closed", closedView), ...(held ? [released] : [])];
      if (await commitWithEvents(this.deps.ds, [held ? lapse(1) : lapse(), close], events)) break;
    }
    const closed = (await this.cards.findOneBy({ id: card.id }))!;
    await this.cardService.finishClose(closed).catch(() => undefined); // the maintenance pass retries
    return closed;
  }

  /**
   * Test helper expire_hold: the processor lets the card's hold lapse, and reports it. A captured
   * hold has settled (its PaymentIntent cannot lapse any more): nothing happens to it or the card.
   */
  async expireHold(card: Card): Promise<Card> {
    if (card.hold_status === "CAPTURED") return card;
    if (card.hold_id && card.hold_status === "OPEN") {
      const processor = this.deps.processors(card.mode);
      const expire = processor.expireHold
        ? () => processor.expireHold!(card.hold_id!)
        : async (signal: AbortSignal) =>
            processor.cancelHold(processorAccount(await this.accounts.get(card.account_id), card.mode), card.hold_id!, `${card.id}:expire_hold`, signal);
      await callProcessor("cancel", this.deps.config.processorTimeoutMs, expire).catch((err) => {
        throw toApiError(err);
      });
    }
    return this.holdCanceled(card);
  }

  /**
   * Cards past expires_at: an OPEN card is closed (revoked, hold released); a USED one is
   * deactivated for new authorizations, and its pending authorization still settles from the hold.
   */
  async expireDue(): Promise<number> {
    const now = Date.now();
    let n = 0;
    // An OPEN card is never revoked; saying so lets the query use the expiry index (unrevoked cards).
    for (const card of await this.cards.find({ where: { status: "OPEN", revoked_at: IsNull(), expires_at: LessThan(now + 1) }, take: 100 }))
      if (await this.expire(card, now)) n++;
    const used = await this.cards.findWhereSql(`${EXPIRED_USED} AND ${DUE_FOR_RECOVERY}`, [now, now], " LIMIT 100");
    for (const card of used) {
      if (!(await this.cardService.claimFollowUp(card))) continue;
      await this.cardService.followUp(card);
      n++;
    }
    return n;
  }

  /**
   * Closes a card that was OPEN past its expiry when read, then revokes it and releases its hold.
   * One that changed since (used by an authorization, closed by its owner) is left alone: a used
   * card's pending authorization settles from that hold, and a close does its own follow-up.
   */
  async expire(card: Card, now = Date.now()): Promise<boolean> {
    const closed = { ...card, status: "CLOSED" as const, closed_at: now };
    const expired =
      (await commitWithEvents(
        this.deps.ds,
        [this.cards.updateStatement({ id: card.id, status: "OPEN" }, { status: "CLOSED", closed_at: now }, 1)],
        [this.event(card, "card.expired", cardListView(closed), SYSTEM)],
      )) !== null;
    if (expired) await this.cardService.followUp(closed);
    return expired;
  }

  // --- the test helpers' purchase ---

  /**
   * An authorization and its settlement in one call (POST /v1/test_helpers/cards/:id/purchase). A
   * retry of the purchase that used the card (same key, its answer lost) is answered as the first,
   * and settles its authorization if the first attempt died before that.
   */
  async purchase(p: Principal, cardId: string, amountCents: number, merchantName?: string, usedKey?: string) {
    let card = await this.cardService.find(p, cardId);
    const auth = await this.authorize(card, { amountCents, merchant: { name: merchantName ?? null }, usedKey });
    if (!auth.approved) return { approved: false, decline_reason: auth.decline_reason, amount_cents: amountCents, card };
    if (amountCents > 0 && auth.status === "pending") {
      card = (await this.cards.findOneBy({ id: card.id }))!;
      await this.settle(card, { amountCents, authorizationId: auth.id, merchantName });
    }
    return { approved: true, decline_reason: null, amount_cents: amountCents, card: (await this.cards.findOneBy({ id: card.id }))! };
  }

  // --- reads ---

  async findAuthorization(p: Principal, id: string): Promise<Authorization> {
    const auth = await this.authorizations.findOneBy({ id, account_id: p.accountId, mode: p.mode });
    if (!auth) throw notFound("authorization");
    return auth;
  }

  async findTransaction(p: Principal, id: string): Promise<Transaction> {
    const txn = await this.transactions.findOneBy({ id, account_id: p.accountId, mode: p.mode });
    if (!txn) throw notFound("transaction");
    return txn;
  }

  /** The processor's authorization, in its mode; null when unknown. */
  byProcessorAuthorization(mode: Mode, processorAuthorizationId: string): Promise<Authorization | null> {
    return this.authorizations.findOneBy({ processor_authorization_id: processorAuthorizationId, mode });
  }

  listAuthorizations(p: Principal, cardId: string | undefined, page: PageQuery): Promise<Page<Authorization>> {
    return pageOf(this.authorizations, { account_id: p.accountId, mode: p.mode }, cardId ? { card_id: cardId } : {}, page);
  }

  listTransactions(p: Principal, cardId: string | undefined, page: PageQuery): Promise<Page<Transaction>> {
    return pageOf(this.transactions, { account_id: p.accountId, mode: p.mode }, cardId ? { card_id: cardId } : {}, page);
  }
}
