import { randomInt } from "node:crypto";
import type { DataSource } from "typeorm";
import { isUniqueViolation } from "../db/datasource.js";
import { placeholders, queryRows, runAtomically, runSql } from "../db/fast.js";
import { newId, randomToken } from "../domain/ids.js";
import { sha256 } from "../domain/secrets.js";
import { withLuhnDigit } from "./luhn.js";
import { formatExpiration, HoldUnavailableError, PaymentDeclinedError, ProcessorError, type CardRefs, type MintedCard, type Processor, type ProcessorAccount, type RevealEndpoint } from "./types.js";

export type SimStep = "hold" | "mint" | "revoke" | "capture" | "cancel" | "ephemeral_key" | "charge" | "refund";
/**
 * fail: the call errors after doing nothing; hang: it never answers; decline: the hold or charge is
 * declined; lost: the next call does its work and its answer is lost (an error), once.
 */
export type SimFault = "fail" | "hang" | "decline" | "lost";

/** Path of the simulated processor's client endpoint for cards (served by apps/server, outside /v1). */
export const SIMULATED_PROCESSOR_CARDS_PATH = "/simulated-processor/v1/issuing/cards";

/** The simulated processor's card as its client endpoint answers it: Stripe's issuing card, number and CVC expanded. */
export interface SimulatedIssuingCard {
  id: string;
  object: "issuing.card";
  last4: string;
  exp_month: number;
  exp_year: number;
  status: string;
  number: string;
  cvc: string;
}

const EPHEMERAL_KEY_TTL_MS = 15 * 60 * 1000;
/** Payment methods ending in this are declined, like a processor's test cards. */
const DECLINING_PAYMENT_METHOD = /_decline$/;

/**
 * A card processor's test environment, in-process. Its state lives in its own sim_* tables, so it
 * survives restarts and is shared by every instance, as a real processor would be. Card numbers
 * and CVCs stay in here; the service only ever sees last four, expiry and the card id.
 */
export class SimulatedProcessor implements Processor {
  readonly name = "simulated";
  private readonly faults = new Map<SimStep, SimFault>();
  private readonly reached = new Map<SimStep, number>();

  constructor(private readonly ds: DataSource) {}

  /** Test hook: make every following call of a step fail, hang or decline, until cleared. */
  setFault(step: SimStep, fault: SimFault | null): void {
    if (fault) this.faults.set(step, fault);
    else this.faults.delete(step);
  }

  /** Test hook: how many calls of a step have reached the processor (a hanging one counts once it hangs). */
  calls(step: SimStep): number {
    return this.reached.get(step) ?? 0;
  }

  private async inject(step: SimStep): Promise<void> {
    this.reached.set(step, this.calls(step) + 1);
    const fault = this.faults.get(step);
    if (fault === "fail") throw new ProcessorError(`Simulated processor failure at ${step}.`, step);
    if (fault === "hang") await new Promise(() => undefined);
  }

  /** After the work: a "lost" fault loses this one answer. */
  private answer(step: SimStep): void {
    if (this.faults.get(step) !== "lost") return;
    this.faults.delete(step);
    throw new ProcessorError(`Simulated processor: the answer of ${step} was lost.`, step);
  }

  async placeHold(account: ProcessorAccount, amountCents: number, _refs: { cardId: string }, idempotencyKey: string) {
    await this.inject("hold");
    if (this.faults.get("hold") === "decline" || DECLINING_PAYMENT_METHOD.test(account.paymentMethod))
      throw new PaymentDeclinedError("card_declined");
    const row = {
      id: newId("hold").replace("hold_", "pi_sim_"),
      idempotency_key: idempotencyKey,
      mode: account.mode,
      payment_method: account.paymentMethod,
      amount_cents: amountCents,
      captured_cents: 0,
      status: "requires_capture",
      created_at: Date.now(),
    };
    const existing = await this.insertOnce("sim_holds", row);
    this.answer("hold");
    return { holdId: existing.id as string };
  }

  async findHolds(_account: ProcessorAccount, refs: CardRefs) {
    const rows = await queryRows(
      this.ds,
      `SELECT id, status FROM sim_holds WHERE idempotency_key = ? OR idempotency_key LIKE ? ORDER BY created_at DESC`,
      [`${refs.cardId}:hold`, `${refs.cardId}:hold:%`],
    );
    return rows.map((row) => ({
      holdId: row.id as string,
      status: row.status === "requires_capture" ? ("held" as const) : row.status === "captured" ? ("captured" as const) : ("canceled" as const),
    }));
  }

  async cancelHold(_account: ProcessorAccount, holdId: string) {
    await this.inject("cancel");
    await queryRows(this.ds, `UPDATE sim_holds SET status = 'canceled' WHERE id = ? AND status = 'requires_capture'`, [holdId]);
    this.answer("cancel");
  }

  async captureHold(_account: ProcessorAccount, holdId: string, amountCents: number) {
    await this.inject("capture");
    const res = await runSql(
      this.ds,
      `UPDATE sim_holds SET status = 'captured', captured_cents = ? WHERE id = ? AND status = 'requires_capture' AND amount_cents >= ?`,
      [amountCents, holdId, amountCents],
    );
    if ((res.affected ?? 0) === 1) {
      this.answer("capture");
      return {};
    }
    const [hold] = await queryRows(this.ds, `SELECT status, amount_cents FROM sim_holds WHERE id = ?`, [holdId]);
    if (hold?.status === "captured") return {}; // captured before: a hold captures once
    if (hold?.status === "canceled") throw new HoldUnavailableError(holdId);
    throw new ProcessorError(`Cannot capture ${amountCents} of hold ${holdId} (${hold ? `${hold.status}, ${hold.amount_cents}` : "unknown"}).`, "capture");
  }

  /** Expires a hold as a real one lapses after about 7 days (test helper expire_hold). */
  async expireHold(holdId: string): Promise<void> {
    await runSql(this.ds, `UPDATE sim_holds SET status = 'canceled' WHERE id = ? AND status = 'requires_capture'`, [holdId]);
  }

  async chargeOffSession(account: ProcessorAccount, amountCents: number, _refs: { cardId: string; paymentId: string }, idempotencyKey: string) {
    await this.inject("charge");
    if (this.faults.get("charge") === "decline" || DECLINING_PAYMENT_METHOD.test(account.paymentMethod))
      throw new PaymentDeclinedError("card_declined");
    const charged = await this.insertOnce("sim_holds", {
      id: newId("hold").replace("hold_", "pi_sim_"),
      idempotency_key: idempotencyKey,
      mode: account.mode,
      payment_method: account.paymentMethod,
      amount_cents: amountCents,
      captured_cents: amountCents,
      status: "captured",
      created_at: Date.now(),
    });
    this.answer("charge");
    return { paymentId: charged.id as string };
  }

  async refund(_account: ProcessorAccount, paymentId: string, amountCents: number, idempotencyKey: string) {
    await this.inject("refund");
    // One refund per key, never more than the payment still holds: both in one transaction.
    const applied = await runAtomically(this.ds, [
      {
        sql: `INSERT INTO sim_refunds (id, idempotency_key, payment_id, amount_cents, created_at) VALUES (?, ?, ?, ?, ?)`,
        params: [newId("re"), idempotencyKey, paymentId, amountCents, Date.now()],
      },
      {
        sql: `UPDATE sim_holds SET captured_cents = captured_cents - ? WHERE id = ? AND status = 'captured' AND captured_cents >= ?`,
        params: [amountCents, paymentId, amountCents],
        expect: 1,
      },
    ]).catch((err) => {
      if (isUniqueViolation(err)) return "repeat" as const; // this key's refund was made already
      throw err;
    });
    if (applied === null) throw new ProcessorError(`Refund of ${amountCents} exceeds what payment ${paymentId} collected.`, "refund");
    this.answer("refund");
  }

  async mintCard(account: ProcessorAccount, card: { cardId: string; amountCents: number }, idempotencyKey: string): Promise<MintedCard> {
    await this.inject("mint");
    const expires = new Date();
    const row = {
      id: newId("ic"),
      idempotency_key: idempotencyKey,
      mode: account.mode,
      number: withLuhnDigit("424242" + String(randomInt(0, 1e9)).padStart(9, "0")),
      cvc: String(randomInt(0, 1000)).padStart(3, "0"),
      exp_month: expires.getUTCMonth() + 1,
      exp_year: expires.getUTCFullYear() + 3,
      spending_limit_cents: card.amountCents,
      status: "active",
      card_ref: card.cardId,
      created_at: Date.now(),
    };
    const minted = mintedCard(await this.insertOnce("sim_cards", row));
    this.answer("mint");
    return minted;
  }

  async findCards(_account: ProcessorAccount, refs: CardRefs) {
    const rows = await queryRows(this.ds, `SELECT id, number, exp_month, exp_year FROM sim_cards WHERE card_ref = ? ORDER BY created_at DESC`, [refs.cardId]);
    return rows.map(mintedCard);
  }

  async revokeCard(_account: ProcessorAccount, processorCardId: string) {
    await this.inject("revoke");
    await queryRows(this.ds, `UPDATE sim_cards SET status = 'canceled' WHERE id = ?`, [processorCardId]);
    this.answer("revoke");
  }

  async createEphemeralKey(account: ProcessorAccount, processorCardId: string) {
    await this.inject("ephemeral_key");
    const secret = `ek_${account.mode}_${randomToken(32)}`;
    const expiresAt = Date.now() + EPHEMERAL_KEY_TTL_MS;
    await queryRows(this.ds, `INSERT INTO sim_ephemeral_keys (secret_hash, card_id, expires_at) VALUES (?, ?, ?)`, [
      sha256(secret),
      processorCardId,
      expiresAt,
    ]);
    return { secret, expiresAt };
  }

  revealEndpoint(processorCardId: string): RevealEndpoint {
    return { url: `${SIMULATED_PROCESSOR_CARDS_PATH}/${encodeURIComponent(processorCardId)}`, apiVersion: null };
  }

  /**
   * The processor's client endpoint (GET /simulated-processor/v1/issuing/cards/:id): the card with
   * its number and CVC, for an ephemeral key made for this very card and not expired; null otherwise.
   */
  async retrieveCardWithKey(secret: string, processorCardId: string): Promise<SimulatedIssuingCard | null> {
    const [key] = await queryRows(this.ds, `SELECT card_id, expires_at FROM sim_ephemeral_keys WHERE secret_hash = ?`, [sha256(secret)]);
    if (!key || key.card_id !== processorCardId || Number(key.expires_at) <= Date.now()) return null;
    const [card] = await queryRows(this.ds, `SELECT id, number, cvc, exp_month, exp_year, status FROM sim_cards WHERE id = ?`, [processorCardId]);
    if (!card) return null;
    const number = String(card.number);
    return {
      id: String(card.id),
      object: "issuing.card",
      last4: number.slice(-4),
      exp_month: Number(card.exp_month),
      exp_year: Number(card.exp_year),
      status: String(card.status),
      number,
      cvc: String(card.cvc),
    };
  }

  /** What the processor's client-side library does with an ephemeral key: reveal PAN and CVC. */
  async reveal(secret: string): Promise<{ number: string; cvc: string; exp_month: number; exp_year: number } | null> {
    const [key] = await queryRows(this.ds, `SELECT card_id, expires_at FROM sim_ephemeral_keys WHERE secret_hash = ?`, [sha256(secret)]);
    if (!key || Number(key.expires_at) < Date.now()) return null;
    const [card] = await queryRows(this.ds, `SELECT number, cvc, exp_month, exp_year FROM sim_cards WHERE id = ?`, [key.card_id]);
    return card ? { number: card.number, cvc: card.cvc, exp_month: Number(card.exp_month), exp_year: Number(card.exp_year) } : null;
  }

  /** Inserts a row keyed by idempotency_key, or returns the row an earlier call with that key made. */
  private async insertOnce(table: "sim_holds" | "sim_cards", row: Record<string, unknown>): Promise<Record<string, unknown>> {
    const cols = Object.keys(row);
    try {
      await queryRows(this.ds, `INSERT INTO ${table} (${cols.join(", ")}) VALUES (${placeholders(cols)})`, Object.values(row));
      return row;
    } catch (err) {
      if (!isUniqueViolation(err)) throw err;
      const [existing] = await queryRows(this.ds, `SELECT * FROM ${table} WHERE idempotency_key = ?`, [row.idempotency_key]);
      return existing;
    }
  }
}

/** What the service keeps of a sim_cards row: id, last four, expiry. */
const mintedCard = (row: Record<string, unknown>): MintedCard => ({
  processorCardId: row.id as string,
  lastFour: String(row.number).slice(-4),
  expiration: formatExpiration(Number(row.exp_month), Number(row.exp_year)),
});
