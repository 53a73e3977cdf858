import { IsNull } from "typeorm";
import { AccountEntity, ApiKeyEntity, PolicyEntity, type Account, type ApiKey, type Mode, type Role } from "../db/entities.js";
import { notFound, unauthorized } from "./errors.js";
import type { Deps, Principal } from "./deps.js";
import { isoTime, newId, randomToken } from "./ids.js";
import { DEFAULT_POLICY } from "./policy.js";
import { safeEqual, sha256 } from "./secrets.js";
import { processorAccount } from "./issuance.js";
import { callProcessor, toApiError } from "./processor-call.js";
import { fastRepository } from "../db/fast.js";

export const accountView = (a: Account) => ({
  id: a.id,
  name: a.name,
  kyb_verified: a.kyb_verified,
  payment_method: a.payment_method,
  created_at: isoTime(a.created_at),
});

export const keyView = (k: ApiKey) => ({
  id: k.id,
  mode: k.mode,
  role: k.role,
  name: k.name,
  prefix: k.prefix,
  last4: k.last4,
  created_at: isoTime(k.created_at),
  revoked_at: k.revoked_at === null ? null : isoTime(k.revoked_at),
});

/** What is still missing before the account may create cards. */
export function missingSetup(a: Account): ("kyb" | "payment_method")[] {
  const missing: ("kyb" | "payment_method")[] = [];
  if (!a.kyb_verified) missing.push("kyb");
  if (!a.payment_method) missing.push("payment_method");
  return missing;
}

/** Accounts and their API keys: the operator API, and authentication of every request. */
export class AccountService {
  constructor(private readonly deps: Deps) {}

  private get accounts() {
    return fastRepository(this.deps.ds, AccountEntity);
  }
  private get keys() {
    return fastRepository(this.deps.ds, ApiKeyEntity);
  }

  async create(name: string): Promise<Account> {
    const account: Account = { id: newId("acct"), name, kyb_verified: false, payment_method: null, created_at: Date.now() };
    await this.deps.ds.transaction(async (em) => {
      await em.getRepository(AccountEntity).insert(account);
      for (const mode of ["test", "live"] as const)
        await em.getRepository(PolicyEntity).insert({ account_id: account.id, mode, ...DEFAULT_POLICY, updated_at: Date.now() });
    });
    return account;
  }

  async get(id: string): Promise<Account> {
    const account = await this.accounts.findOneBy({ id });
    if (!account) throw notFound("account");
    return account;
  }

  async setKyb(id: string, verified: boolean): Promise<Account> {
    await this.get(id);
    await this.accounts.update({ id }, { kyb_verified: verified });
    return this.get(id);
  }

  /**
   * Saves the payment method. Processors with set-up (Stripe: a Customer per account and mode with
   * the method attached) prepare it in every mode they are configured for. `required` (the operator
   * API): the method is saved only if at least one configured mode accepted it, and the error of
   * that mode is the answer otherwise. `best_effort` (first-start seeding): always saved; set-up is
   * retried lazily on the first hold.
   */
  async setPaymentMethod(id: string, paymentMethod: string | null, prepare: "required" | "best_effort" = "best_effort"): Promise<Account> {
    const account = await this.get(id);
    if (paymentMethod) {
      let firstError: unknown;
      let prepared = 0;
      let configured = 0;
      for (const mode of ["test", "live"] as const) {
        let processor;
        try {
          processor = this.deps.processors(mode);
        } catch {
          continue; // no processor in this mode: nothing to prepare
        }
        if (!processor.prepareAccount) continue;
        configured++;
        try {
          await callProcessor("setup", this.deps.config.processorTimeoutMs, () =>
            processor.prepareAccount!(processorAccount({ ...account, payment_method: paymentMethod }, mode)),
          );
          prepared++;
        } catch (err) {
          firstError ??= err;
        }
      }
      if (prepare === "required" && configured > 0 && prepared === 0) throw toApiError(firstError);
    }
    await this.accounts.update({ id }, { payment_method: paymentMethod });
    return this.get(id);
  }

  /** Makes a key; the secret is returned this once and only its sha256 is kept. */
  async createKey(accountId: string, mode: Mode, role: Role, name: string | null) {
    await this.get(accountId);
    const secret = `sk_${mode}_${randomToken(40)}`;
    const key: ApiKey = {
      id: newId("key"),
      account_id: accountId,
      mode,
      role,
      name,
      secret_hash: sha256(secret),
      prefix: secret.slice(0, 8),
      last4: secret.slice(-4),
      created_at: Date.now(),
      revoked_at: null,
    };
    await this.keys.insert(key);
    return { key, secret };
  }

  async listKeys(accountId: string): Promise<ApiKey[]> {
    await this.get(accountId);
    return this.keys.find({ where: { account_id: accountId }, order: { created_at: "DESC" } });
  }

  async revokeKey(keyId: string): Promise<number> {
    const key = await this.keys.findOneBy({ id: keyId });
    if (!key) throw notFound("key");
    if (key.revoked_at !== null) return key.revoked_at;
    const now = Date.now();
    await this.keys.update({ id: keyId, revoked_at: IsNull() }, { revoked_at: now });
    return (await this.keys.findOneBy({ id: keyId }))!.revoked_at ?? now;
  }

  /** Resolves `Authorization: Bearer sk_…` to its key; revoked or unknown keys are 401. */
  async authenticate(authorization: string | undefined): Promise<Principal> {
    // The auth scheme is case-insensitive (RFC 7235); the key is not.
    const match = /^[Bb][Ee][Aa][Rr][Ee][Rr]\s+(sk_(test|live)_[A-Za-z0-9_-]{16,200})\s*$/.exec(authorization ?? "");
    if (!match) {
      throw unauthorized(
        authorization
          ? "Malformed API key. Send it as 'Authorization: Bearer sk_test_…' or 'Bearer sk_live_…'."
          : "Missing API key. Send it as 'Authorization: Bearer <API_KEY>'.",
      );
    }
    const hash = sha256(match[1]!);
    const key = await this.keys.findOneBy({ secret_hash: hash });
    if (!key || !safeEqual(key.secret_hash, hash) || key.revoked_at !== null) throw unauthorized();
    return { keyId: key.id, accountId: key.account_id, mode: key.mode, role: key.role };
  }
}
