import { randomBytes } from "node:crypto";
import { MAX_WEBHOOK_ENDPOINTS, type EventType } from "@cardctl/contract";
import { WebhookDeliveryEntity, WebhookEndpointEntity, type WebhookDelivery, type WebhookDeliveryStatus, type WebhookEndpoint } from "../db/entities.js";
import { fastRepository, type Statement } from "../db/fast.js";
import { AddressRefused, resolveWebhookHost } from "../webhooks/addresses.js";
import type { Deps, Principal } from "./deps.js";
import { AppError, notFound } from "./errors.js";
import { actorOf, commitWithEvents, type NewEvent } from "./events.js";
import { newId } from "./ids.js";
import { pageOf, type Page, type PageQuery } from "./paging.js";
import { validationError } from "./validation.js";
import { wakeWorkerHere } from "./webhook-deliveries.js";
import { deliveryView, endpointView } from "./webhook-views.js";

const invalidUrl = (message: string) => validationError([{ path: "url", message }]);

/**
 * A webhook URL, checked: absolute, https (http only with WEBHOOK_ALLOW_PRIVATE, for local
 * receivers), no credentials or fragment, and a host that resolves to public addresses only
 * (unless WEBHOOK_ALLOW_PRIVATE). Delivery checks the address again on every attempt.
 */
async function checkedUrl(raw: string, allowPrivate: boolean): Promise<string> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw invalidUrl("url must be an absolute URL, e.g. https://example.com/webhooks");
  }
  if (url.protocol !== "https:" && !(allowPrivate && url.protocol === "http:"))
    throw invalidUrl(allowPrivate ? "url must start with https:// or http://" : "url must start with https:// (http:// is allowed only when the server sets WEBHOOK_ALLOW_PRIVATE)");
  if (url.username || url.password) throw invalidUrl("url must not carry a user name or password");
  if (url.hash) throw invalidUrl("url must not have a #fragment");
  try {
    await resolveWebhookHost(url.hostname, allowPrivate);
  } catch (err) {
    if (err instanceof AddressRefused) throw invalidUrl(`url is not allowed: ${err.message}`);
    throw err;
  }
  return url.toString();
}

/** Standard Webhooks secret: whsec_ and base64 of 32 random bytes. */
const newSecret = () => `whsec_${randomBytes(32).toString("base64")}`;

/** An account's webhook endpoints (per mode) and their deliveries: create, list, delete, retry. */
export class WebhookEndpointService {
  constructor(private readonly deps: Deps) {}

  private get repo() {
    return fastRepository(this.deps.ds, WebhookEndpointEntity);
  }
  private get deliveryRepo() {
    return fastRepository(this.deps.ds, WebhookDeliveryEntity);
  }

  async create(p: Principal, input: { url: string; events: ("*" | EventType)[]; description?: string | undefined }): Promise<WebhookEndpoint> {
    const url = await checkedUrl(input.url, this.deps.config.webhooks.allowPrivate);
    const count = await this.repo.countUsingIndex("ix_webhook_endpoints_list", { account_id: p.accountId, mode: p.mode });
    if (count >= MAX_WEBHOOK_ENDPOINTS)
      throw new AppError(409, "limit_exceeded", `An account has at most ${MAX_WEBHOOK_ENDPOINTS} webhook endpoints per mode; delete one first.`, { limit: MAX_WEBHOOK_ENDPOINTS });
    const now = Date.now();
    const row: Omit<WebhookEndpoint, "seq"> = {
      id: newId("we"),
      account_id: p.accountId,
      mode: p.mode,
      url,
      // ["*"] takes every type (the fan-out matches it exactly); otherwise each type once.
      events: JSON.stringify(input.events.includes("*") ? ["*"] : [...new Set(input.events)]),
      description: input.description ?? null,
      secret: newSecret(),
      status: "enabled",
      created_at: now,
      updated_at: now,
    };
    // The event before the endpoint, in one transaction: the account's other endpoints may receive it, the new one does not.
    await commitWithEvents(
      this.deps.ds,
      [this.repo.insertStatement(row)],
      [{ accountId: p.accountId, mode: p.mode, type: "webhook_endpoint.created", object: endpointView(row), actor: actorOf(p) }],
      "events_first",
    );
    return { ...row, seq: 0 };
  }

  list(p: Principal, page: PageQuery): Promise<Page<WebhookEndpoint>> {
    return pageOf(this.repo, { account_id: p.accountId, mode: p.mode }, {}, page, undefined, "ix_webhook_endpoints_list");
  }

  private async find(p: Principal, id: string): Promise<WebhookEndpoint> {
    const endpoint = await this.repo.findOneBy({ id, account_id: p.accountId, mode: p.mode });
    if (!endpoint) throw notFound("webhook endpoint");
    return endpoint;
  }

  /**
   * Deletes the endpoint and its deliveries: nothing more is sent to it, attempts in flight aside.
   * A `webhook_endpoint.deleted` event commits with it (once: a concurrent delete that got there
   * first leaves this one nothing to delete and nothing to announce).
   */
  async remove(p: Principal, id: string): Promise<void> {
    const endpoint = await this.find(p, id);
    await commitWithEvents(
      this.deps.ds,
      [
        { sql: "DELETE FROM webhook_deliveries WHERE endpoint_id = ?", params: [endpoint.id] },
        { sql: "DELETE FROM webhook_endpoints WHERE id = ?", params: [endpoint.id], expect: 1 },
      ],
      [{ accountId: p.accountId, mode: p.mode, type: "webhook_endpoint.deleted", object: endpointView(endpoint), actor: actorOf(p) }],
    );
  }

  async deliveries(p: Principal, endpointId: string, status: WebhookDeliveryStatus | undefined, page: PageQuery): Promise<Page<WebhookDelivery>> {
    const endpoint = await this.find(p, endpointId);
    return pageOf(this.deliveryRepo, { account_id: p.accountId, mode: p.mode }, { endpoint_id: endpoint.id, status }, page, undefined, "ix_webhook_deliveries_endpoint");
  }

  /**
   * Sends a delivery again now. A pending one keeps its schedule and is only made due now (unless
   * an attempt is in flight); a finished one gets one more attempt, without automatic retries after
   * it. A disabled endpoint is enabled again: retrying says the receiver is back. Each change
   * commits with its event (`webhook_delivery.retried`, `webhook_endpoint.enabled`), both in one
   * transaction; a change that a concurrent one made moot (an attempt in flight, the endpoint
   * enabled meanwhile) is left out with its event. The events are written first: an endpoint
   * enabled again is not sent the news of its own retry.
   */
  async retry(p: Principal, endpointId: string, deliveryId: string): Promise<WebhookDelivery> {
    const endpoint = await this.find(p, endpointId);
    const delivery = await this.deliveryRepo.findOneBy({ id: deliveryId, endpoint_id: endpoint.id });
    if (!delivery) throw notFound("webhook delivery");
    const now = Date.now();
    const scope = { accountId: p.accountId, mode: p.mode, actor: actorOf(p) };
    const changes: { step: Statement; event: NewEvent }[] = [];
    if (endpoint.status === "disabled")
      changes.push({
        step: { sql: "UPDATE webhook_endpoints SET status = 'enabled', updated_at = ? WHERE id = ? AND status = 'disabled'", params: [now, endpoint.id], expect: 1 },
        event: { ...scope, type: "webhook_endpoint.enabled", object: endpointView({ ...endpoint, status: "enabled", updated_at: now }) },
      });
    const requeued: WebhookDelivery =
      delivery.status === "pending"
        ? { ...delivery, next_attempt_at: now, updated_at: now }
        : { ...delivery, status: "pending", next_attempt_at: now, retry_until: now, lease_token: null, updated_at: now };
    changes.push({
      step:
        delivery.status === "pending"
          ? {
              sql: "UPDATE webhook_deliveries SET next_attempt_at = ?, updated_at = ? WHERE id = ? AND status = 'pending' AND (lease_token IS NULL OR next_attempt_at <= ?)",
              params: [now, now, delivery.id, now],
              expect: 1,
            }
          : {
              sql: "UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = ?, retry_until = ?, lease_token = NULL, updated_at = ? WHERE id = ? AND status = ?",
              params: [now, now, now, delivery.id, delivery.status],
              expect: 1,
            },
      event: { ...scope, type: "webhook_delivery.retried", object: deliveryView(requeued) },
    });
    const commit = (some: typeof changes) =>
      commitWithEvents(
        this.deps.ds,
        some.map((c) => ({ ...c.step, afterCommit: () => wakeWorkerHere(this.deps.ds) })),
        some.map((c) => c.event),
        "events_first",
      );
    // Together, or (when one of them missed) each on its own.
    if (!(await commit(changes)) && changes.length > 1) for (const change of changes) await commit([change]);
    return (await this.deliveryRepo.findOneBy({ id: delivery.id }))!;
  }
}
