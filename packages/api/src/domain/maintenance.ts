import type { AccountService } from "./accounts.js";
import type { ApprovalService } from "./approvals.js";
import type { CardService } from "./cards.js";
import type { EventService } from "./events.js";
import type { IdempotencyStore } from "./idempotency.js";
import type { CardIssuer } from "./issuance.js";
import type { CardLifecycle } from "./lifecycle.js";
import type { OwnerService } from "./owners.js";
import type { PaymentQueue } from "./payments.js";
import type { WebhookDeliveryQueue } from "./webhook-deliveries.js";

/**
 * The periodic pass: expires approvals, finishes or compensates cards whose request died, closes
 * cards past their expiry, carries out payments that are due (the retry queue), completes
 * processor work left half done, forgets idempotency keys older than 24 h and failed sign-ins
 * older than a block, and purges events and webhook deliveries older than 30 days. Every step claims rows with
 * conditional updates, so all instances may run it at once.
 */
export class Maintenance {
  constructor(
    private readonly accounts: AccountService,
    private readonly approvals: ApprovalService,
    private readonly cards: CardService,
    private readonly issuer: CardIssuer,
    private readonly idempotency: IdempotencyStore,
    private readonly lifecycle: CardLifecycle,
    private readonly payments: PaymentQueue,
    private readonly events: EventService,
    private readonly owners: OwnerService,
    private readonly webhookDeliveries: WebhookDeliveryQueue,
  ) {}

  /**
   * One pass. A step that fails (the database away for a moment, a processor error it does not
   * handle) does not keep the others from running: each runs, and the first failure is thrown at
   * the end, for the caller to log.
   */
  async run(): Promise<{
    expired: number;
    recovered: number;
    cardsExpired: number;
    paid: number;
    settled: number;
    purged: number;
    eventsPurged: number;
    deliveriesPurged: number;
  }> {
    let failure: unknown;
    const step = async (work: () => Promise<number>) => {
      try {
        return await work();
      } catch (err) {
        failure ??= err;
        return 0;
      }
    };
    const expired = await step(() => this.approvals.expireDue());
    const recovered = await step(() =>
      this.issuer.recoverStuck(
        (id) => this.accounts.get(id),
        (card, error) => this.cards.recoveryFailed(card, error),
      ),
    );
    const cardsExpired = await step(() => this.lifecycle.expireDue());
    const paid = await step(() => this.payments.runDue());
    const settled = await step(() => this.cards.settleLeftovers());
    const purged = await step(() => this.idempotency.purgeExpired());
    const eventsPurged = await step(() => this.events.purgeExpired());
    const deliveriesPurged = await step(() => this.webhookDeliveries.purgeExpired());
    await step(() => this.owners.purgeSignInFailures());
    if (failure !== undefined) throw failure;
    return { expired, recovered, cardsExpired, paid, settled, purged, eventsPurged, deliveriesPurged };
  }
}
