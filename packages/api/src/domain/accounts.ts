import { IsNull, LessThan, type FindOptionsWhere } from "typeorm";
import { AccountEntity, ApiKeyEntity, PolicyEntity, type Account, type ApiKey, type Mode, type Role } from "../db/entities.js";
import { AppError, notFound, unauthorized } from "./errors.js";
import { unknownCursor, type Page, type PageQuery } from "./paging.js";
import type { Deps, Principal } from "./deps.js";
import { isoTime, newId, randomToken } from "./ids.js";
import { DEFAULT_POLICY, type PolicyValues } from "./policy.js";
import { policyValues } from "./policies.js";
import { credentialOf } from "./credentials.js";
import { safeEqual, sha256 } from "./secrets.js";
import { processorAccount } from "./issuance.js";
import { callProcessor, toApiError } from "./processor-call.js";
import { fastRepository, queryRows, runAtomically, type Statement } from "../db/fast.js";
import type { Processor } from "../processor/types.js";
import { commitWithEvents, SYSTEM, type Actor } from "./events.js";

/**
 * Who an account's cards are issued to (the Stripe Issuing cardholder), as the operator set it;
 * stored as JSON in accounts.cardholder. The tax id is kept for Stripe and never shown in full.
 */
export interface CardholderDetails {
  type: "company" | "individual";
  name: string;
  email: string | null;
  phone_number: string | null;
  billing: { line1: string; line2: string | null; city: string; state: string | null; postal_code: string; country: string };
  tax_id: string | null;
  /** When the operator set these details (ms). */
  updated_at: number;
  /**
   * Random per set: with it, every set is a new version for the processor (its idempotency keys
   * hash the details), and the hash, which covers the tax id, cannot be reversed by guessing.
   */
  nonce: string;
}

/** The body of POST /admin/v1/accounts/:id/cardholder, validated (contract: cardholderInput). */
export interface CardholderInput {
  type: "company" | "individual";
  name: string;
  email?: string;
  phone_number?: string;
  billing: { line1: string; line2?: string; city: string; state?: string; postal_code: string; country: string };
  tax_id?: string;
}

export const cardholderOf = (a: Pick<Account, "cardholder">): CardholderDetails | null =>
  a.cardholder ? (JSON.parse(a.cardholder) as CardholderDetails) : null;

/** The last 4 letters or digits of a tax id (separators removed): enough to recognise it, never the whole id. */
const last4 = (taxId: string) => taxId.replace(/[^A-Za-z0-9]/g, "").slice(-4);

export const cardholderView = (c: CardholderDetails) => ({
  type: c.type,
  name: c.name,
  email: c.email,
  phone_number: c.phone_number,
  billing: { ...c.billing },
  tax_id_last4: c.tax_id === null ? null : last4(c.tax_id),
  updated_at: isoTime(c.updated_at),
});

export const accountView = (a: Account) => {
  const cardholder = cardholderOf(a);
  return {
    id: a.id,
    name: a.name,
    kyb_verified: a.kyb_verified,
    payment_method: a.payment_method,
    cardholder: cardholder ? cardholderView(cardholder) : null,
    created_at: isoTime(a.created_at),
  };
};

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

/** A key just made, with its secret: the one answer that shows it. */
export const createdKeyView = (k: ApiKey, secret: string) => ({ id: k.id, secret, mode: k.mode, role: k.role, name: k.name, created_at: isoTime(k.created_at) });

export type SetupItem = "kyb" | "payment_method" | "cardholder";

/** What card creation needs beyond kyb and a payment method, by the processor serving the mode. */
export interface SetupNeeds {
  /** Stripe issues cards to an Issuing cardholder made from the account's details (DESIGN 3.3). */
  cardholder: boolean;
}

/** What is still missing before the account may create cards, in the order kyb, payment_method, cardholder. */
export function missingSetup(a: Account, needs: SetupNeeds): SetupItem[] {
  const missing: SetupItem[] = [];
  if (!a.kyb_verified) missing.push("kyb");
  if (!a.payment_method) missing.push("payment_method");
  if (needs.cardholder && !a.cardholder) missing.push("cardholder");
  return missing;
}

/** An account's row, with its policy's values for a mode (null where it has no row for the mode). */
const ACCOUNT_WITH_POLICY =
  "SELECT a.*, p.approval_required AS policy_approval_required, p.max_amount_cents AS policy_max_amount_cents " +
  "FROM accounts a LEFT JOIN policies p ON p.account_id = a.id AND p.mode = ? WHERE a.id = ?";

/** Accounts and their API keys: the operator API, and authentication of every request. */
export class AccountService {
  constructor(private readonly deps: Deps) {}

  private get accounts() {
    return fastRepository(this.deps.ds, AccountEntity);
  }
  private get keys() {
    return fastRepository(this.deps.ds, ApiKeyEntity);
  }

  private needsByMode?: Record<Mode, SetupNeeds>;

  /**
   * What card creation in `mode` needs beyond kyb and a payment method: the cardholder when Stripe
   * serves the mode. A mode without a processor needs nothing more (its card calls answer 503).
   * The processors are fixed for the life of the process, so this is worked out once.
   */
  setupNeeds(mode: Mode): SetupNeeds {
    this.needsByMode ??= { test: this.needsOf("test"), live: this.needsOf("live") };
    return this.needsByMode[mode];
  }

  private needsOf(mode: Mode): SetupNeeds {
    return { cardholder: this.processorOf(mode)?.name === "stripe" };
  }

  /** The processor serving `mode`, or null when none is configured. */
  private processorOf(mode: Mode): Processor | null {
    try {
      return this.deps.processors(mode);
    } catch {
      return null;
    }
  }

  /**
   * The account's set-up as its owner sees it in `mode` (the dashboard's Setup page, and the
   * `account.payment_method_updated` event): what it has and still needs in each mode, and how the
   * owner adds the payment method in `mode`: `test_cards` (the simulated processor), `stripe`
   * (Stripe.js and a SetupIntent), or null (no processor for the mode). No secrets: the tax id is
   * left out, and Stripe's key is the publishable one.
   */
  setupView(account: Account, mode: Mode) {
    const cardholder = cardholderOf(account);
    const modes = (["test", "live"] as const).map((m) => ({
      mode: m,
      processor: (this.processorOf(m)?.name ?? null) as "simulated" | "stripe" | null,
      missing: missingSetup(account, this.setupNeeds(m)),
    }));
    const current = this.processorOf(mode);
    const browser = current?.browserSetup;
    const missing = missingSetup(account, this.setupNeeds(mode));
    return {
      account_id: account.id,
      mode,
      /** Cards can be created in `mode`: nothing missing, and a processor to make them. */
      setup_complete: current !== null && missing.length === 0,
      missing,
      kyb_verified: account.kyb_verified,
      cardholder: {
        needed: this.setupNeeds(mode).cardholder,
        set: cardholder !== null,
        name: cardholder?.name ?? null,
        type: cardholder?.type ?? null,
      },
      payment_method: account.payment_method,
      modes,
      collect: (browser ? "stripe" : current?.name === "simulated" ? "test_cards" : null) as "stripe" | "test_cards" | null,
      stripe_publishable_key: browser?.publishableKey ?? null,
    };
  }

  async create(name: string): Promise<Account> {
    const account: Account = { id: newId("acct"), name, kyb_verified: false, payment_method: null, cardholder: null, created_at: Date.now() };
    // One transaction, run again whole if InnoDB picks it as a deadlock victim.
    const policies = fastRepository(this.deps.ds, PolicyEntity);
    await runAtomically(this.deps.ds, [
      this.accounts.insertStatement(account),
      ...(["test", "live"] as const).map((mode) => policies.insertStatement({ account_id: account.id, mode, ...DEFAULT_POLICY, updated_at: account.created_at })),
    ]);
    return account;
  }

  async get(id: string): Promise<Account> {
    const account = await this.accounts.findOneBy({ id });
    if (!account) throw notFound("account");
    return account;
  }

  /**
   * The key's account and its policy in the key's mode, in one statement: a card's decision, an
   * approval and the spend summary need both, and on MariaDB every statement is a round trip of
   * the server's busiest thread.
   */
  async getWithPolicy(p: Principal): Promise<{ account: Account; policy: PolicyValues }> {
    const [row] = await queryRows(this.deps.ds, ACCOUNT_WITH_POLICY, [p.mode, p.accountId]);
    if (!row) throw notFound("account");
    const policy = row.policy_max_amount_cents === null ? null : { approval_required: Boolean(row.policy_approval_required), max_amount_cents: Number(row.policy_max_amount_cents) };
    return { account: this.accounts.hydrate(row), policy: policyValues(policy) };
  }

  /**
   * Saves who the account's cards are issued to. Nothing is sent to the processor here: Stripe's
   * cardholder is created, or updated to these details, by the next card creation in each mode.
   */
  async setCardholder(id: string, input: CardholderInput): Promise<Account> {
    await this.get(id);
    const details: CardholderDetails = {
      type: input.type,
      name: input.name,
      email: input.email ?? null,
      phone_number: input.phone_number ?? null,
      billing: {
        line1: input.billing.line1,
        line2: input.billing.line2 ?? null,
        city: input.billing.city,
        state: input.billing.state ?? null,
        postal_code: input.billing.postal_code,
        country: input.billing.country,
      },
      tax_id: input.type === "company" ? (input.tax_id ?? null) : null,
      updated_at: Date.now(),
      nonce: randomToken(16),
    };
    const before = await this.get(id);
    const cardholder = JSON.stringify(details);
    await this.commitSetupChange({ ...before, cardholder }, this.accounts.updateStatement({ id }, { cardholder }), "account.cardholder_updated");
    return this.get(id);
  }

  /** Marks the account's business verification done or not; a change commits with `account.kyb_updated` in each mode, no change with none. */
  async setKyb(id: string, verified: boolean): Promise<Account> {
    const before = await this.get(id);
    const change: Statement = { sql: "UPDATE accounts SET kyb_verified = ? WHERE id = ? AND kyb_verified = ?", params: [Number(verified), id, Number(!verified)], expect: 1 };
    await this.commitSetupChange({ ...before, kyb_verified: verified }, change, "account.kyb_updated");
    return this.get(id);
  }

  /**
   * An operator's change of the account's set-up, with its event in each mode (the account's
   * set-up is shared by both), whose object is the set-up after it (setupView: no tax id). The
   * operator acts as the system. Nothing is announced when the conditional change missed.
   */
  private commitSetupChange(after: Account, change: Statement, type: "account.kyb_updated" | "account.cardholder_updated") {
    return commitWithEvents(
      this.deps.ds,
      [change],
      (["test", "live"] as const).map((mode) => ({ accountId: after.id, mode, type, object: this.setupView(after, mode), actor: SYSTEM })),
    );
  }

  /**
   * Saves the payment method. Processors with set-up (Stripe: a Customer per account and mode with
   * the method attached) prepare it in every mode they are configured for. `required` (the operator
   * API): the method is saved only if at least one configured mode accepted it, and the error of
   * that mode is the answer otherwise. `best_effort` (first-start seeding): always saved; set-up is
   * retried lazily on the first hold.
   *
   * The change commits with an `account.payment_method_updated` event in each mode (the account
   * has one payment method for both), whose object is the account's set-up in that mode
   * (setupView). `actor`: the owner on the dashboard; the operator API and first-start seeding are
   * the system's.
   */
  async setPaymentMethod(id: string, paymentMethod: string | null, prepare: "required" | "best_effort" = "best_effort", actor: Actor = SYSTEM): Promise<Account> {
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
          await callProcessor("setup", this.deps.config.processorTimeoutMs, (signal) =>
            processor.prepareAccount!(processorAccount({ ...account, payment_method: paymentMethod }, mode), signal),
          );
          prepared++;
        } catch (err) {
          firstError ??= err;
        }
      }
      if (prepare === "required" && configured > 0 && prepared === 0) throw toApiError(firstError);
    }
    const after: Account = { ...account, payment_method: paymentMethod };
    await commitWithEvents(
      this.deps.ds,
      [this.accounts.updateStatement({ id }, { payment_method: paymentMethod })],
      (["test", "live"] as const).map((mode) => ({ accountId: id, mode, type: "account.payment_method_updated" as const, object: this.setupView(after, mode), actor })),
    );
    return this.get(id);
  }

  /** Makes a key; the secret is returned this once and only its sha256 is kept. `actor`: the operator API is the system's. */
  async createKey(accountId: string, mode: Mode, role: Role, name: string | null, actor: Actor = SYSTEM) {
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
    await commitWithEvents(this.deps.ds, [this.keys.insertStatement(key)], [{ accountId, mode, type: "api_key.created", object: keyView(key), actor }]);
    return { key, secret };
  }

  async listKeys(accountId: string): Promise<ApiKey[]> {
    await this.get(accountId);
    return this.keys.find({ where: { account_id: accountId }, order: { created_at: "DESC" } });
  }

  /**
   * A page of the account's keys of both modes, newest first (the owner's dashboard). Keys have no
   * sequence number: the order is (created_at, id), so keys made in the same millisecond page
   * without gaps or repeats.
   */
  async pageKeys(accountId: string, page: PageQuery): Promise<Page<ApiKey>> {
    await this.get(accountId);
    const mine = { account_id: accountId };
    let where: FindOptionsWhere<ApiKey> | FindOptionsWhere<ApiKey>[] = mine;
    if (page.startingAfter) {
      const cursor = await this.keys.findOneBy({ ...mine, id: page.startingAfter });
      if (!cursor)
        throw unknownCursor();
      where = [
        { ...mine, created_at: LessThan(cursor.created_at) },
        { ...mine, created_at: cursor.created_at, id: LessThan(cursor.id) },
      ];
    }
    const rows = await this.keys.find({ where, order: { created_at: "DESC", id: "DESC" }, take: page.limit + 1 });
    return { data: rows.slice(0, page.limit), has_more: rows.length > page.limit };
  }

  /** `accountId`: only a key of this account (an owner's request); any key for the operator. */
  async revokeKey(keyId: string, actor: Actor = SYSTEM, accountId?: string): Promise<number> {
    const key = await this.keys.findOneBy({ id: keyId });
    if (!key || (accountId !== undefined && key.account_id !== accountId)) throw notFound("key");
    if (key.revoked_at !== null) return key.revoked_at;
    const now = Date.now();
    await commitWithEvents(
      this.deps.ds,
      [this.keys.updateStatement({ id: keyId, revoked_at: IsNull() }, { revoked_at: now }, 1)],
      [{ accountId: key.account_id, mode: key.mode, type: "api_key.revoked", object: keyView({ ...key, revoked_at: now }), actor }],
    );
    return (await this.keys.findOneBy({ id: keyId }))!.revoked_at ?? now;
  }

  /** Whether the key a request authenticated with is still unrevoked (a long-lived request checks again). */
  async keyInForce(keyId: string): Promise<boolean> {
    const key = await this.keys.findOneBy({ id: keyId });
    return key !== null && key.revoked_at === null;
  }

  /**
   * Resolves `Authorization: Bearer sk_…` (or HTTP Basic with the key as user name, `curl -u sk_…:`)
   * to its key; revoked or unknown keys are 401.
   */
  async authenticate(authorization: string | undefined): Promise<Principal> {
    const secret = credentialOf(authorization);
    const match = secret === undefined ? null : /^sk_(test|live)_[A-Za-z0-9_-]{16,200}$/.exec(secret);
    if (!match) {
      throw unauthorized(
        authorization
          ? "Malformed API key. Send it as 'Authorization: Bearer sk_test_…' or 'Bearer sk_live_…'."
          : "Missing API key. Send it as 'Authorization: Bearer <API_KEY>'.",
      );
    }
    const hash = sha256(match[0]);
    const key = await this.keys.findOneBy({ secret_hash: hash });
    if (!key || !safeEqual(key.secret_hash, hash) || key.revoked_at !== null) throw unauthorized();
    return { keyId: key.id, accountId: key.account_id, mode: key.mode, role: key.role };
  }
}
