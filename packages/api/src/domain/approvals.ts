import { LessThan, MoreThan } from "typeorm";
import { isUniqueViolation } from "../db/datasource.js";
import { ApprovalEntity, type Approval, type ApprovalStatus, type Card } from "../db/entities.js";
import type { AccountService } from "./accounts.js";
import type { Deps, Principal } from "./deps.js";
import { AppError, notFound } from "./errors.js";
import { newId } from "./ids.js";
import type { CardIssuer } from "./issuance.js";
import { pageOf, type Page, type PageQuery } from "./paging.js";
import { effectivePolicy } from "./policy.js";
import { assertPolicy, assertSetup } from "./rules.js";
import { fastRepository, insertedId } from "../db/fast.js";
import { commitWithEvents, actorOf, SYSTEM } from "./events.js";
import { approvalView } from "./views.js";

/** Approvals expired per round of the sweep (each with its own transaction and event). */
const EXPIRY_BATCH = 100;

const notPending = (a: Approval) =>
  new AppError(409, "approval_not_pending", `Approval ${a.id} is ${a.status}, not PENDING.`, { status: a.status });

/** Approval requests: recorded when the policy asks for a human, then approved, rejected or expired. */
export class ApprovalService {
  constructor(
    private readonly deps: Deps,
    private readonly accounts: AccountService,
    private readonly issuer: CardIssuer,
  ) {}

  private get repo() {
    return fastRepository(this.deps.ds, ApprovalEntity);
  }

  /** The approval a claim of an Idempotency-Key recorded (CardService's creation key), if any. */
  byCreationKey(creationKey: string): Promise<Approval | null> {
    return this.repo.findOneBy({ creation_key: creationKey });
  }

  async request(
    p: Principal,
    input: { amountCents: number; agentId: string | null; purpose: string | null; overrideMax: number | null; creationKey: string | null },
  ): Promise<Approval> {
    const now = Date.now();
    const approval: Omit<Approval, "seq"> = {
      id: newId("appr"),
      account_id: p.accountId,
      mode: p.mode,
      amount_cents: input.amountCents,
      agent_id: input.agentId,
      purpose: input.purpose,
      override_max_cents: input.overrideMax,
      status: "PENDING",
      reason: null,
      card_id: null,
      creation_key: input.creationKey,
      decision_key: null,
      expires_at: now + this.deps.config.approvalTtlMs,
      created_at: now,
      decided_at: null,
    };
    let inserted;
    try {
      inserted = await commitWithEvents(
        this.deps.ds,
        [this.repo.insertStatement(approval)],
        [{ accountId: p.accountId, mode: p.mode, type: "approval.created", object: approvalView({ ...approval, seq: 0 }), actor: actorOf(p) }],
      );
    } catch (err) {
      if (!isUniqueViolation(err) || !input.creationKey) throw err;
      return (await this.byCreationKey(input.creationKey))!;
    }
    // Not read back: its seq comes from the insert, as for cards (CardIssuer.issue).
    return { ...approval, seq: insertedId(inserted![0]!) };
  }

  /**
   * Marks every approval past its expires_at as EXPIRED, each with its event (a conditional update,
   * so of instances sweeping at once one expires it). Safe to run anywhere, any time.
   */
  async expireDue(scope?: Principal): Promise<number> {
    const now = Date.now();
    const where = { status: "PENDING" as const, expires_at: LessThan(now + 1), ...(scope ? { account_id: scope.accountId, mode: scope.mode } : {}) };
    let n = 0;
    for (;;) {
      const due = await this.repo.find({ where, take: EXPIRY_BATCH });
      for (const a of due) {
        const expired = { ...a, status: "EXPIRED" as const, decided_at: now };
        const done = await commitWithEvents(
          this.deps.ds,
          [this.repo.updateStatement({ id: a.id, status: "PENDING" }, { status: "EXPIRED", decided_at: now }, 1)],
          [{ accountId: a.account_id, mode: a.mode, type: "approval.expired", object: approvalView(expired), actor: SYSTEM }],
        );
        if (done) n++;
      }
      if (due.length < EXPIRY_BATCH) return n;
    }
  }

  async list(p: Principal, status: ApprovalStatus, page: PageQuery): Promise<Page<Approval>> {
    await this.expireDue(p);
    return pageOf(this.repo, { account_id: p.accountId, mode: p.mode }, { status }, page);
  }

  /**
   * Pending, unexpired requests of one account, counted in its own (account, mode, status) range:
   * left to themselves both databases preferred the expiry index, whose range holds every
   * account's pending requests.
   */
  async countPending(p: Principal): Promise<number> {
    return this.repo.countUsingIndex("ix_approvals_list", {
      account_id: p.accountId,
      mode: p.mode,
      status: "PENDING",
      expires_at: MoreThan(Date.now()),
    });
  }

  /** One approval request of the key's account and mode (its expiry applied); 404 for another's. */
  async get(p: Principal, id: string): Promise<Approval> {
    await this.expireDue(p);
    const a = await this.repo.findOneBy({ id, account_id: p.accountId, mode: p.mode });
    if (!a) throw notFound("approval");
    return a;
  }

  /**
   * Approves and issues the card synchronously. The approval's claim (a conditional update to
   * APPROVED) commits with the card's intent record, so of many parallel approves exactly one
   * issues a card, and a crash leaves the card for the recovery pass to finish. If issuing fails,
   * the compensation puts the approval back to PENDING for another try. A retry of the approve
   * that claimed it (same Idempotency-Key: `decisionKey`) answers with that card.
   */
  async approve(p: Principal, id: string, decisionKey?: string): Promise<Card> {
    const a = await this.get(p, id);
    const { account, policy: base } = await this.accounts.getWithPolicy(p);
    // Decided already: the card of the approve that decided it under this key (a retry), else 409.
    const decided = async (current: Approval): Promise<Card> => {
      const mine = current.status === "APPROVED" && decisionKey !== undefined && current.decision_key === decisionKey;
      const card = mine ? await this.issuer.resume(account, current.card_id!, actorOf(p)) : null;
      if (card) return card;
      throw notPending(current);
    };
    if (a.status !== "PENDING") return decided(a);
    assertSetup(account, this.deps.config.publicUrl, this.accounts.setupNeeds(p.mode));
    const policy = effectivePolicy(base, { max_amount_cents: a.override_max_cents ?? undefined });
    assertPolicy(policy, a.amount_cents);
    this.deps.processors(p.mode);
    const card = await this.issuer.issueClaimed(p, account, { amountCents: a.amount_cents, agentId: a.agent_id, purpose: a.purpose, approvalId: a.id }, (cardId) =>
      this.repo.updateStatement(
        { id, status: "PENDING", expires_at: MoreThan(Date.now()) },
        { status: "APPROVED", card_id: cardId, decision_key: decisionKey ?? null, decided_at: Date.now() },
        1,
      ),
    );
    // Another approve claimed it first: perhaps one with this key (a retry that took the key over).
    return card ?? decided(await this.get(p, id));
  }

  /** Rejects a pending request; a retry of the reject that decided it (same `decisionKey`) is answered as the first was. */
  async reject(p: Principal, id: string, reason: string | null, decisionKey?: string): Promise<void> {
    const a = await this.get(p, id);
    const now = Date.now();
    const decision = { status: "REJECTED" as const, reason, decision_key: decisionKey ?? null, decided_at: now };
    const done =
      a.status === "PENDING" &&
      (await commitWithEvents(
        this.deps.ds,
        [this.repo.updateStatement({ id, status: "PENDING", expires_at: MoreThan(now) }, decision, 1)],
        [{ accountId: p.accountId, mode: p.mode, type: "approval.rejected", object: approvalView({ ...a, ...decision }), actor: actorOf(p) }],
      ));
    if (done) return;
    const current = await this.get(p, id);
    if (current.status === "REJECTED" && decisionKey !== undefined && current.decision_key === decisionKey) return;
    throw notPending(current);
  }
}
