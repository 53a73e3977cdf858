import { In, LessThan } from "typeorm";
import { CardEntity, PaymentEntity, type Card, type Payment } from "../db/entities.js";
import { fastRepository, runSql, type Statement } from "../db/fast.js";
import { excessRefundKey, HoldUnavailableError, PaymentDeclinedError, RefundFailedError, type Collected } from "../processor/types.js";
import type { AccountService } from "./accounts.js";
import { backoffMs, MAX_ATTEMPTS } from "./backoff.js";
import type { Deps } from "./deps.js";
import { newId } from "./ids.js";
import { cardRefs, processorAccount } from "./issuance.js";
import { callProcessor } from "./processor-call.js";
import { commitWithEvents, holdEvent, SYSTEM, type NewEvent } from "./events.js";
import { operatorPaymentView } from "./views.js";

/** A refund waiting for its payment is tried this long after that payment's next attempt. */
const WAIT_AFTER_SOURCE_MS = 1_000;

/** One key per payment and kind: a capture that became a charge calls another endpoint with other parameters. */
const processorKey = (payment: Payment) => `${payment.id}:${payment.kind}`;

/** Why a capture or charge needs an operator when the refund of what the processor's minimum charge took beyond it failed: the customer paid the minimum. */
const excessRefundFailed = (payment: Payment, error: string) =>
  `the refund of what the processor's minimum charge took beyond ${payment.amount_cents} cents failed: ${error}`;

/** A payment row to insert with the transaction that causes it (runAtomically). */
export type NewPayment = Pick<Payment, "kind" | "amount_cents" | "refund_of">;

/**
 * The money that moves between the account's payment method and the card processor because a
 * card's transactions settled: the capture of the card's hold, off-session charges beyond it,
 * refunds. Each payment is a row written with its transaction (the intent), then carried out with
 * the payment's own id as the processor's idempotency key, so its parameters never change under
 * that key. Failures are retried from a queue ordered by next attempt, with exponential backoff;
 * a declined charge is uncollected, and repeated failures need attention.
 */
export class PaymentQueue {
  constructor(
    private readonly deps: Deps,
    private readonly accounts: AccountService,
  ) {}

  private get repo() {
    return fastRepository(this.deps.ds, PaymentEntity);
  }
  private get cards() {
    return fastRepository(this.deps.ds, CardEntity);
  }

  /** The insert statement of a payment caused by a transaction; carried out later by `run`. */
  intent(card: Card, transactionId: string, p: NewPayment): Payment & { statement: Statement } {
    const now = Date.now();
    const row: Omit<Payment, "seq"> = {
      id: newId("pay"),
      account_id: card.account_id,
      mode: card.mode,
      card_id: card.id,
      transaction_id: transactionId,
      kind: p.kind,
      amount_cents: p.amount_cents,
      status: "pending",
      refund_of: p.refund_of,
      processor_payment_id: p.kind === "hold_capture" ? card.hold_id : null,
      attempts: 0,
      next_attempt_at: now,
      last_error: null,
      lease_until: null,
      created_at: now,
      updated_at: now,
    };
    return { ...row, seq: 0, statement: this.repo.insertStatement(row) };
  }

  /** The card's payments, oldest first. */
  ofCard(cardId: string): Promise<Payment[]> {
    return this.repo.find({ where: { card_id: cardId }, order: { seq: "ASC" } });
  }

  /** Carries out the given payments now, in order; what fails stays queued. */
  async run(ids: string[]): Promise<void> {
    for (const id of ids) await this.attempt(id);
  }

  /** The maintenance pass: every payment whose next attempt is due. */
  async runDue(): Promise<number> {
    const due = await this.repo.find({ where: { status: "pending", next_attempt_at: LessThan(Date.now() + 1) }, order: { next_attempt_at: "ASC" }, take: 50 });
    let done = 0;
    for (const p of due) if (await this.attempt(p.id)) done++;
    return done;
  }

  /**
   * Payments that need an operator (attention) or were not collected, newest first (at most 100),
   * each with what refunds waived of it.
   */
  async problems(filter: { status?: "uncollected" | "attention"; accountId?: string }): Promise<{ payment: Payment; waivedCents: number }[]> {
    const rows = await this.repo.find({
      where: { status: filter.status ?? In(["uncollected", "attention"]), ...(filter.accountId ? { account_id: filter.accountId } : {}) },
      order: { seq: "DESC" },
      take: 100,
    });
    const uncollected = rows.filter((p) => p.status === "uncollected");
    // By their cards (ix_payments_card): refund_of has no index of its own.
    const waivers = uncollected.length ? await this.repo.find({ where: { card_id: In(uncollected.map((p) => p.card_id)), status: "waived" } }) : [];
    return rows.map((payment) => ({
      payment,
      waivedCents: waivers.filter((w) => w.refund_of === payment.id).reduce((n, w) => n + w.amount_cents, 0),
    }));
  }

  /**
   * One attempt at one payment, under a lease so one instance carries it out at a time; the lease
   * is the one a card's creation has (CREATION_LEASE_MS): after it, a dead attempt is taken over.
   */
  private async attempt(id: string): Promise<boolean> {
    const now = Date.now();
    const claimed = await runSql(
      this.deps.ds,
      "UPDATE payments SET lease_until = ?, attempts = attempts + 1, updated_at = ? WHERE id = ? AND status = 'pending' AND next_attempt_at <= ? AND (lease_until IS NULL OR lease_until < ?)",
      [now + this.deps.config.creationLeaseMs, now, id, now, now],
    );
    if ((claimed.affected ?? 0) !== 1) return false;
    const payment = (await this.repo.findOneBy({ id }))!;
    const card = (await this.cards.findOneBy({ id: payment.card_id }))!;
    try {
      const done = await this.carryOut(payment, card);
      if (done === null) return this.waitForSource(payment);
      const { excessRefundFailure, ...made } = done;
      // A hold's capture (or release, for 0) is announced once the processor has made it.
      const held = payment.kind === "hold_capture" ? [holdEvent(card, payment.amount_cents)] : [];
      if (excessRefundFailure) {
        // The money moved, but more than the payment's amount of it: an operator gives the rest back.
        return this.stop(payment, "attention", excessRefundFailed(payment, excessRefundFailure), made, held);
      }
      await this.conclude(payment, { ...made, lease_until: null, next_attempt_at: null, last_error: null, updated_at: Date.now() }, "pending", held);
      if (payment.kind !== "refund") await this.runWaitingRefunds(payment);
      return true;
    } catch (err) {
      if (err instanceof HoldUnavailableError) {
        // The hold lapsed before the capture, released with nothing captured: the amount is charged off-session instead.
        const charge = { kind: "charge" as const, processor_payment_id: null, lease_until: null, next_attempt_at: Date.now(), updated_at: Date.now() };
        await commitWithEvents(this.deps.ds, [this.repo.updateStatement({ id, status: "pending" }, charge, 1)], [holdEvent(card, 0)]);
        return this.attempt(id);
      }
      if (err instanceof PaymentDeclinedError && payment.kind === "charge") return this.stop(payment, "uncollected", err.message);
      // Asking again under its key answers the same: the customer's money back needs an operator.
      if (err instanceof RefundFailedError) return this.stop(payment, "attention", err.message);
      return this.later(payment, err instanceof Error ? err.message : String(err));
    }
  }

  /**
   * The processor call of a payment, and what it leaves; null when it must wait (a refund of a
   * payment not yet made). A refund of a charge that was never collected moves no money: it waives
   * that much of what the account owes. A hold captured for 0 (its capture was netted whole by an
   * earlier refund) is released.
   */
  private async carryOut(payment: Payment, card: Card): Promise<(Pick<Payment, "status" | "processor_payment_id"> & Collected) | null> {
    const source = payment.kind === "refund" ? await this.repo.findOneBy({ id: payment.refund_of! }) : null;
    if (source?.status === "uncollected") return { status: "waived", processor_payment_id: null };
    // Only a collection that succeeded can be refunded; one needing an operator leaves its refunds
    // to the operator too (a hold_capture names its hold before it is captured).
    if (payment.kind === "refund" && source?.status !== "succeeded") return null;
    const processor = this.deps.processors(card.mode);
    const pa = processorAccount(await this.accounts.get(card.account_id), card.mode);
    const timeout = this.deps.config.processorTimeoutMs;
    const key = processorKey(payment);
    switch (payment.kind) {
      case "hold_capture": {
        if (payment.amount_cents === 0) {
          await callProcessor("cancel", timeout, (signal) => processor.cancelHold(pa, card.hold_id!, key, signal));
          return { status: "succeeded", processor_payment_id: card.hold_id! };
        }
        const collected = await callProcessor("capture", timeout, (signal) => processor.captureHold(pa, card.hold_id!, payment.amount_cents, key, signal));
        return { ...collected, status: "succeeded", processor_payment_id: card.hold_id! };
      }
      case "charge": {
        const { paymentId, ...collected } = await callProcessor("charge", timeout, (signal) =>
          processor.chargeOffSession(pa, payment.amount_cents, { ...cardRefs(card), paymentId: payment.id }, key, signal),
        );
        return { ...collected, status: "succeeded", processor_payment_id: paymentId };
      }
      case "refund":
        await callProcessor("refund", timeout, (signal) => processor.refund(pa, source!.processor_payment_id!, payment.amount_cents, key, signal));
        return { status: "succeeded", processor_payment_id: source!.processor_payment_id! };
    }
  }

  /** Ends a payment's attempts in `status`, with why (and what the last attempt `made`, if anything). */
  private async stop(payment: Payment, status: "uncollected" | "attention", error: string, made: Partial<Payment> = {}, events: NewEvent[] = []): Promise<boolean> {
    await this.conclude(payment, { ...made, status, lease_until: null, next_attempt_at: null, last_error: error.slice(0, 500), updated_at: Date.now() }, "pending", events);
    return false;
  }

  /** The refunds that waited for a payment just made are carried out now, not at their next turn. */
  private async runWaitingRefunds(source: Payment): Promise<void> {
    const waiting = await this.repo.find({ where: { card_id: source.card_id, refund_of: source.id, status: "pending" } });
    for (const refund of waiting) await this.runNow(refund.id);
  }

  /** One pending payment's attempt now, whenever its next one was due. */
  private async runNow(id: string): Promise<boolean> {
    await this.repo.update({ id, status: "pending" }, { next_attempt_at: Date.now() });
    return this.attempt(id);
  }

  /**
   * A refund of a payment not made yet: waiting is no failed attempt. It is tried again right after
   * the payment's own next attempt; a payment that needs an operator leaves its refunds to the
   * operator too.
   */
  private async waitForSource(payment: Payment): Promise<boolean> {
    const source = (await this.repo.findOneBy({ id: payment.refund_of! }))!;
    const waiting = `waiting for the payment it refunds (${source.id})`;
    if (source.status === "attention") return this.stop(payment, "attention", `${waiting}, which needs an operator`);
    const now = Date.now();
    await this.conclude(payment, {
      status: "pending",
      attempts: payment.attempts - 1,
      lease_until: null,
      next_attempt_at: Math.max(source.next_attempt_at ?? now, now) + WAIT_AFTER_SOURCE_MS,
      last_error: waiting,
      updated_at: now,
    });
    // Made while this attempt looked (its runWaitingRefunds found this one still claimed): go on now.
    const again = await this.repo.findOneBy({ id: source.id });
    if (again?.status !== "succeeded") return false;
    return this.runNow(payment.id);
  }

  /** A failed attempt: the next one after a backoff, or attention after too many. */
  private async later(payment: Payment, error: string): Promise<boolean> {
    const attempts = payment.attempts;
    const attention = attempts >= MAX_ATTEMPTS;
    await this.conclude(payment, {
      status: attention ? "attention" : "pending",
      lease_until: null,
      next_attempt_at: attention ? null : Date.now() + backoffMs(attempts),
      last_error: error.slice(0, 500),
      updated_at: Date.now(),
    });
    return false;
  }

  /**
   * A refund the processor reported failed after accepting it (Stripe's refund.failed), named by
   * the idempotency key it was made under: that refund payment needs an operator; so does a
   * capture or charge below the processor's minimum whose refund of the difference failed (the
   * customer paid the minimum: key `<its key>:refund`). `too_early` while our own attempt at the
   * payment has not concluded (the processor redelivers the news); `ignored` for any other key.
   */
  async refundFailed(mode: Payment["mode"], key: string, error: string): Promise<"applied" | "ignored" | "too_early"> {
    const payment = await this.repo.findOneBy({ id: key.split(":")[0], mode });
    if (!payment || (payment.status !== "pending" && payment.status !== "succeeded")) return "ignored";
    const ownRefund = payment.kind === "refund" && key === processorKey(payment);
    const minimumTopUp = payment.kind !== "refund" && key === excessRefundKey(processorKey(payment));
    if (!ownRefund && !minimumTopUp) return "ignored";
    if (payment.status === "pending") return "too_early";
    const outcome = { status: "attention" as const, last_error: (minimumTopUp ? excessRefundFailed(payment, error) : error).slice(0, 500), updated_at: Date.now() };
    return (await this.conclude(payment, outcome, "succeeded")) ? "applied" : "ignored";
  }

  /**
   * Writes the outcome of an attempt at a payment still in status `from`; one that leaves it
   * uncollected or needing an operator is announced (payment.uncollected, processor.attention_needed)
   * with it, as are `events` of what the attempt made.
   */
  private async conclude(
    payment: Payment,
    outcome: Partial<Payment> & { status: Payment["status"] },
    from: Payment["status"] = "pending",
    events: NewEvent[] = [],
  ): Promise<boolean> {
    const type: NewEvent["type"] | null =
      outcome.status === "uncollected" ? "payment.uncollected" : outcome.status === "attention" ? "processor.attention_needed" : null;
    const done = await commitWithEvents(
      this.deps.ds,
      [this.repo.updateStatement({ id: payment.id, status: from }, outcome, 1)],
      [...events, ...(type ? [{ accountId: payment.account_id, mode: payment.mode, type, object: operatorPaymentView({ ...payment, ...outcome }), actor: SYSTEM }] : [])],
    );
    return done !== null;
  }
}
