import { randomBytes } from "node:crypto";
import { MAX_WEBHOOK_ENDPOINTS, type EventType } from "@cardctl/contract";
import { WebhookDeliveryEntity, WebhookEndpointEntity, type WebhookDelivery, type WebhookDeliveryStatus, type WebhookEndpoint } from "../db/entities.js";
import { fastRepository, runAtomically, type Statement } from "../db/fast.js";
import { AddressRefused, resolveWebhookHost } from "../webhooks/addresses.js";
import type { Deps, Principal } from "./deps.js";
import { AppError, notFound } from "./errors.js";
import { newId } from "./ids.js";
import { pageOf, type Page, type PageQuery } from "./paging.js";
import { validationError } from "./validation.js";

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
    await this.repo.insert(row);
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

  /** Deletes the endpoint and its deliveries: nothing more is sent to it, attempts in flight aside. */
  async remove(p: Principal, id: string): Promise<void> {
    const endpoint = await this.find(p, id);
    await runAtomically(this.deps.ds, [
      { sql: "DELETE FROM webhook_deliveries WHERE endpoint_id = ?", params: [endpoint.id] },
      { sql: "DELETE FROM webhook_endpoints WHERE id = ?", params: [endpoint.id] },
    ]);
  }

  async deliveries(p: Principal, endpointId: string, status: WebhookDeliveryStatus | undefined, page: PageQuery): Promise<Page<WebhookDelivery>> {
    const endpoint = await this.find(p, endpointId);
    return pageOf(this.deliveryRepo, { account_id: p.accountId, mode: p.mode }, { endpoint_id: endpoint.id, status }, page, undefined, "ix_webhook_deliveries_endpoint");
  }

  /**
   * Sends a delivery again now. A pending one keeps its schedule and is only made due now (unless
   * an attempt is in flight); a finished one gets one more attempt, without automatic retries after
   * it. A disabled endpoint is enabled again: retrying says the receiver is back.
   */
  async retry(p: Principal, endpointId: string, deliveryId: string): Promise<WebhookDelivery> {
    const endpoint = await this.find(p, endpointId);
    const delivery = await this.deliveryRepo.findOneBy({ id: deliveryId, endpoint_id: endpoint.id });
    if (!delivery) throw notFound("webhook delivery");
    const now = Date.now();
    const steps: Statement[] = [];
    if (endpoint.status === "disabled")
      steps.push({ sql: "UPDATE webhook_endpoints SET status = 'enabled', updated_at = ? WHERE id = ? AND status = 'disabled'", params: [now, endpoint.id] });
    steps.push(
      delivery.status === "pending"
        ? {
            sql: "UPDATE webhook_deliveries SET next_attempt_at = ?, updated_at = ? WHERE id = ? AND status = 'pending' AND (lease_token IS NULL OR next_attempt_at <= ?)",
            params: [now, now, delivery.id, now],
          }
        : {
            sql: "UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = ?, retry_until = ?, lease_token = NULL, updated_at = ? WHERE id = ? AND status = ?",
            params: [now, now, now, delivery.id, delivery.status],
          },
    );
    await runAtomically(this.deps.ds, steps);
    return (await this.deliveryRepo.findOneBy({ id: delivery.id }))!;
  }
}
