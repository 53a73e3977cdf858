import { PolicyEntity, type Policy } from "../db/entities.js";
import type { Deps, Principal } from "./deps.js";
import { DEFAULT_POLICY, type PolicyValues } from "./policy.js";
import { fastRepository } from "../db/fast.js";

const values = (p: Policy | null): PolicyValues =>
  p ? { approval_required: p.approval_required, max_amount_cents: p.max_amount_cents } : { ...DEFAULT_POLICY };

/** The default policy of an account, one per mode. */
export class PolicyService {
  constructor(private readonly deps: Deps) {}

  private get repo() {
    return fastRepository(this.deps.ds, PolicyEntity);
  }

  async read(p: Principal): Promise<PolicyValues> {
    return values(await this.repo.findOneBy({ account_id: p.accountId, mode: p.mode }));
  }

  async update(p: Principal, patch: Partial<PolicyValues>): Promise<PolicyValues> {
    const changes = Object.fromEntries(Object.entries(patch).filter(([, v]) => v !== undefined));
    // Only the fields sent are written, so two partial updates at once cannot undo each other.
    if (Object.keys(changes).length > 0)
      await this.repo.update({ account_id: p.accountId, mode: p.mode }, { ...changes, updated_at: Date.now() });
    return this.read(p);
  }
}
