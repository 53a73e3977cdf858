import { LessThanOrEqual, MoreThan } from "typeorm";
import { affected, isUniqueViolation } from "../db/datasource.js";
import { ApprovalEntity, type Account, type Approval, type ApprovalStatus, type Card } from "../db/entities.js";
import type { AccountService } from "./accounts.js";
import type { Deps, Principal } from "./deps.js";
import { AppError, notFound } from "./errors.js";
import { newId } from "./ids.js";
import type { CardIssuer } from "./issuance.js";
import { pageOf, type Page, type PageQuery } from "./paging.js";
import { effectivePolicy } from "./policy.js";
import type { PolicyService } from "./policies.js";
import { assertPolicy, assertSetup } from "./rules.js";
import { fastRepository } from "../db/fast.js";

const notPending = (a: Approval) =>
  new AppError(409, "approval_not_pending", `Approval ${a.id} is ${a.status}, not PENDING.`, { status: a.status });

/** Approval requests: recorded when the policy asks for a human, then approved, rejected or expired. */
export class ApprovalService {
  constructor(
    private readonly deps: Deps,
    private readonly accounts: AccountService,
    private readonly policies: PolicyService,
    private readonly issuer: CardIssuer,
  ) {}

  private get repo() {
    return fastRepository(this.deps.ds, ApprovalEntity);
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
      expires_at: now + this.deps.config.approvalTtlMs,
      created_at: now,
      decided_at: null,
    };
    let inserted;
    try {
      inserted = await this.repo.insert(approval);
    } catch (err) {
      if (!isUniqueViolation(err) || !input.creationKey) throw err;
      return (await this.repo.findOneBy({ creation_key: input.creationKey }))!;
    }
    // Not read back: its seq comes from the insert, as for cards (CardIssuer.issue).
    return { ...approval, seq: inserted.identifiers[0]!.seq as number };
  }

  /** Marks every approval past its expires_at as EXPIRED. Safe to run anywhere, any time. */
  async expireDue(scope?: Principal): Promise<number> {
    const where = { status: "PENDING" as const, expires_at: LessThanOrEqual(Date.now()) };
    const res = await this.repo.update(scope ? { ...where, account_id: scope.accountId, mode: scope.mode } : where, {
      status: "EXPIRED",
      decided_at: Date.now(),
    });
    return affected(res);
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

  private async find(p: Principal, id: string): Promise<Approval> {
    await this.expireDue(p);
    const a = await this.repo.findOneBy({ id, account_id: p.accountId, mode: p.mode });
    if (!a) throw notFound("approval");
    return a;
  }

  /**
   * Approves and issues the card synchronously. The approval is claimed with a conditional update,
   * so of many parallel approves exactly one issues a card; if issuing fails the claim is undone
   * and the request stays PENDING for another try.
   */
  async approve(p: Principal, id: string): Promise<Card> {
    const a = await this.find(p, id);
    if (a.status !== "PENDING") throw notPending(a);
    const account: Account = await this.accounts.get(p.accountId);
    assertSetup(account, this.deps.config.publicUrl);
    const policy = effectivePolicy(await this.policies.read(p), { max_amount_cents: a.override_max_cents ?? undefined });
    assertPolicy(policy, a.amount_cents);
    this.deps.processors(p.mode);
    const cardId = newId("card");
    const claimed = await this.repo.update(
      { id, status: "PENDING", expires_at: MoreThan(Date.now()) },
      { status: "APPROVED", card_id: cardId, decided_at: Date.now() },
    );
    if (affected(claimed) !== 1) throw notPending(await this.find(p, id));
    try {
      return await this.issuer.issue(p, account, {
        cardId,
        amountCents: a.amount_cents,
        agentId: a.agent_id,
        purpose: a.purpose,
        approvalId: a.id,
      });
    } catch (err) {
      await this.issuer.detachFailed(cardId);
      await this.repo.update({ id, status: "APPROVED", card_id: cardId }, { status: "PENDING", card_id: null, decided_at: null });
      throw err;
    }
  }

  async reject(p: Principal, id: string, reason: string | null): Promise<void> {
    const res = await this.repo.update(
      { id, account_id: p.accountId, mode: p.mode, status: "PENDING", expires_at: MoreThan(Date.now()) },
      { status: "REJECTED", reason, decided_at: Date.now() },
    );
    if (affected(res) !== 1) {
      const a = await this.find(p, id);
      throw notPending(a);
    }
  }
}
