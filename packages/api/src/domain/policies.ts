import { PolicyEntity, type Policy } from "../db/entities.js";
import type { Deps, Principal } from "./deps.js";
import { DEFAULT_POLICY, type PolicyValues } from "./policy.js";
import { fastRepository } from "../db/fast.js";
import { commitWithEvents, actorOf } from "./events.js";

/** A policy row's values; the default policy where an account has no row for the mode. */
export const policyValues = (p: Pick<Policy, "approval_required" | "max_amount_cents"> | null): PolicyValues =>
  p ? { approval_required: p.approval_required, max_amount_cents: p.max_amount_cents } : { ...DEFAULT_POLICY };

/** The default policy of an account, one per mode. */
export class PolicyService {
  constructor(private readonly deps: Deps) {}

  private get repo() {
    return fastRepository(this.deps.ds, PolicyEntity);
  }

  async read(p: Principal): Promise<PolicyValues> {
    return policyValues(await this.repo.findOneBy({ account_id: p.accountId, mode: p.mode }));
  }

  /**
   * Only the fields sent are written, so two partial updates at once cannot undo each other. The
   * event (policy.updated) shows the policy read before with this update's fields over it.
   */
  async update(p: Principal, patch: Partial<PolicyValues>): Promise<PolicyValues> {
    const changes = Object.fromEntries(Object.entries(patch).filter(([, v]) => v !== undefined)) as Partial<PolicyValues>;
    if (Object.keys(changes).length === 0) return this.read(p);
    const before = await this.read(p);
    const after = { ...before, ...changes };
    await commitWithEvents(
      this.deps.ds,
      [this.repo.updateStatement({ account_id: p.accountId, mode: p.mode }, { ...changes, updated_at: Date.now() }, 1)],
      [{ accountId: p.accountId, mode: p.mode, type: "policy.updated", object: after, actor: actorOf(p) }],
    );
    return this.read(p);
  }
}
