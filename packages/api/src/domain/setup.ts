import type { Mode } from "../db/entities.js";
import { SetupIntentError } from "../processor/types.js";
import type { AccountService } from "./accounts.js";
import type { Deps, Principal } from "./deps.js";
import { AppError, notFound } from "./errors.js";
import { actorOf } from "./events.js";
import { callProcessor, toApiError } from "./processor-call.js";

/**
 * The owner's side of an account's set-up (the dashboard's Setup page): what the account has and
 * still needs, and the owner adding its payment method, either as a test card on the simulated
 * processor or through the processor's browser library (Stripe.js: a SetupIntent). The payment
 * method is saved through AccountService.setPaymentMethod, as the operator API saves one, with the
 * owner as the actor of its event. KYB and the cardholder stay the operator's.
 */
export class SetupService {
  constructor(
    private readonly deps: Deps,
    private readonly accounts: AccountService,
  ) {}

  /** What the account has and still needs in each mode, and how the owner adds the payment method in the session's mode (AccountService.setupView). */
  async status(p: Principal) {
    return this.accounts.setupView(await this.accounts.get(p.accountId), p.mode);
  }

  /** A test card of the simulated processor (test mode), saved as the operator API saves a payment method. */
  async saveTestCard(p: Principal, paymentMethod: string) {
    const processor = this.deps.processors(p.mode);
    if (processor.name !== "simulated")
      throw new AppError(400, "bad_request", `Test cards are for the simulated processor; ${p.mode} mode runs on ${processor.name}: add a card with its form instead.`);
    await this.accounts.setPaymentMethod(p.accountId, paymentMethod, "required", actorOf(p));
    return this.status(p);
  }

  /** The start of the owner's card form (Stripe.js): a SetupIntent for the account's Customer, and the publishable key. */
  async startBrowserSetup(p: Principal) {
    const setup = this.browserSetupOf(p.mode);
    const account = await this.accounts.get(p.accountId);
    // The same open intent until a payment method is saved: reloading the page makes no new one.
    const attempt = account.payment_method ?? "none";
    const intent = await callProcessor("setup", this.deps.config.processorTimeoutMs, (signal) => setup.start({ accountId: account.id, mode: p.mode }, attempt, signal)).catch(
      (err: unknown) => {
        throw toApiError(err);
      },
    );
    return { setup_intent: intent.id, client_secret: intent.clientSecret, publishable_key: setup.publishableKey! };
  }

  /**
   * After Stripe.js confirmed the card: the intent is read from the processor (nothing the
   * browser says about it is trusted), and its payment method saved only if the intent is this
   * account's and succeeded (404 not_found / 409 setup_intent_not_succeeded otherwise).
   */
  async finishBrowserSetup(p: Principal, intentId: string) {
    const setup = this.browserSetupOf(p.mode);
    const { paymentMethod } = await callProcessor("setup", this.deps.config.processorTimeoutMs, (signal) =>
      setup.finish({ accountId: p.accountId, mode: p.mode }, intentId, signal),
    ).catch((err: unknown) => {
      if (err instanceof SetupIntentError)
        throw err.reason === "not_found"
          ? notFound("setup intent for this account")
          : new AppError(409, "setup_intent_not_succeeded", err.message, { status: err.status ?? null });
      throw toApiError(err);
    });
    await this.accounts.setPaymentMethod(p.accountId, paymentMethod, "required", actorOf(p));
    return this.status(p);
  }

  private browserSetupOf(mode: Mode) {
    const processor = this.deps.processors(mode);
    const setup = processor.browserSetup;
    if (!setup) throw new AppError(400, "bad_request", `${mode} mode runs on the ${processor.name} processor, which has no card form: choose a test card.`);
    if (!setup.publishableKey)
      throw new AppError(
        503,
        "processor_not_configured",
        `Stripe's card form needs the publishable key: the operator sets STRIPE_${mode.toUpperCase()}_PUBLISHABLE_KEY (pk_${mode}_…) and restarts the server.`,
      );
    return setup;
  }
}
