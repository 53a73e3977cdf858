import { randomBytes } from "node:crypto";
import { MAX_WEBHOOK_ENDPOINTS, MAX_WEBHOOK_URL_LENGTH, type EventType } from "@cardctl/contract";
import {
  WebhookDeliveryEntity,
  WebhookEndpointEntity,
  type WebhookDelivery,
  type WebhookDeliveryStatus,
  type WebhookEndpoint,
  type WebhookEndpointStatus,
} from "../db/entities.js";
import { fastRepository, type Statement } from "../db/fast.js";
import { AddressRefused, resolveWebhookHost } from "../webhooks/addresses.js";
import type { Deps, Principal } from "./deps.js";
import { AppError, notFound } from "./errors.js";
import { actorOf, commitWithEvents, type NewEvent } from "./events.js";
import { newId } from "./ids.js";
import { pageOf, type Page, type PageQuery } from "./paging.js";
import { validationError } from "./validation.js";
import { failPendingStatement, lockEndpointsOf, wakeWorkerHere } from "./webhook-deliveries.js";
import { deliveryView, endpointView } from "./webhook-views.js";

const invalidUrl = (message: string) => validationError([{ path: "url", message }]);

/**
 * A webhook URL, checked: absolute, https (http only with WEBHOOK_ALLOW_PRIVATE, for local
 * receivers), no credentials or fragment, and a host that resolves to public addresses only
 * (unless WEBHOOK_ALLOW_PRIVATE). Delivery checks the address again on every attempt.
 */
async function checkedUrl(raw: string, { allowPrivate, timeoutMs }: { allowPrivate: boolean; timeoutMs: number }): Promise<string> {
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
  // What is stored and sent is the URL written out in full, where a space or a non-ASCII
  // character takes 3 to 12 characters (é is %C3%A9).
  const written = url.toString();
  if (written.length > MAX_WEBHOOK_URL_LENGTH)
    throw invalidUrl(`url must be at most ${MAX_WEBHOOK_URL_LENGTH} characters once percent-encoded (it is ${written.length})`);
  try {
    await resolveWebhookHost(url.hostname, allowPrivate, timeoutMs);
  } catch (err) {
    if (err instanceof AddressRefused) throw invalidUrl(`url is not allowed: ${err.message}`);
    throw err;
  }
  return written;
}

/** Standard Webhooks secret: whsec_ and base64 of 32 random bytes. */
const newSecret = () => `whsec_${randomBytes(32).toString("base64")}`;

type EventChoice = "*" | EventType;
/** ["*"] takes every type (the fan-out matches it exactly); otherwise each type once. */
const eventsColumn = (events: EventChoice[]) => JSON.stringify(events.includes("*") ? ["*"] : [...new Set(events)]);

/** A change of an endpoint read at one moment: its statements (conditional on that read), its events, the endpoint after it. */
interface EndpointChange {
  steps: Statement[];
  events: NewEvent[];
  next: WebhookEndpoint;
  /** Whose news the events are: endpoints as they were before the change (the default), or after it. */
  fanOut?: "before" | "after";
}

/** Rotated-out secrets keep signing this long by default (24 hours). */
const DEFAULT_PREVIOUS_SECRET_SECONDS = 24 * 3600;

/** An account's webhook endpoints (per mode) and their deliveries: create, list, delete, retry. */
export class WebhookEndpointService {
  constructor(private readonly deps: Deps) {}

  private get repo() {
    return fastRepository(this.deps.ds, WebhookEndpointEntity);
  }
  private get deliveryRepo() {
    return fastRepository(this.deps.ds, WebhookDeliveryEntity);
  }

  async create(p: Principal, input: { url: string; events: EventChoice[]; description?: string | undefined }): Promise<WebhookEndpoint> {
    const url = await checkedUrl(input.url, this.deps.config.webhooks);
    const now = Date.now();
    const row: Omit<WebhookEndpoint, "seq"> = {
      id: newId("we"),
      account_id: p.accountId,
      mode: p.mode,
      url,
      events: eventsColumn(input.events),
      description: input.description ?? null,
      secret: newSecret(),
      previous_secret: null,
      previous_secret_expires_at: null,
      status: "enabled",
      created_at: now,
      updated_at: now,
    };
    // The account's endpoints locked first (lockEndpointsOf), and counted under that lock: creations at once never pass the limit.
    const lock = lockEndpointsOf(p.accountId);
    const underLimit: Statement = {
      sql: `${lock.sql} AND (SELECT COUNT(*) FROM webhook_endpoints WHERE account_id = ? AND mode = ?) < ?`,
      params: [...lock.params, p.accountId, p.mode, MAX_WEBHOOK_ENDPOINTS],
      expect: 1,
    };
    // The event before the endpoint: the account's other endpoints may receive it, the new one does not.
    const done = await commitWithEvents(
      this.deps.ds,
      [this.repo.insertStatement(row)],
      [{ accountId: p.accountId, mode: p.mode, type: "webhook_endpoint.created", object: endpointView(row), actor: actorOf(p) }],
      "events_first",
      [underLimit],
    );
    if (!done)
      throw new AppError(409, "limit_exceeded", `An account has at most ${MAX_WEBHOOK_ENDPOINTS} webhook endpoints per mode; delete one first.`, { limit: MAX_WEBHOOK_ENDPOINTS });
    return { ...row, seq: 0 };
  }

  list(p: Principal, page: PageQuery): Promise<Page<WebhookEndpoint>> {
    return pageOf(this.repo, { account_id: p.accountId, mode: p.mode }, {}, page, undefined, { index: "ix_webhook_endpoints_list" });
  }

  async get(p: Principal, id: string): Promise<WebhookEndpoint> {
    const endpoint = await this.repo.findOneBy({ id, account_id: p.accountId, mode: p.mode });
    if (!endpoint) throw notFound("webhook endpoint");
    return endpoint;
  }

  /**
   * Changes the endpoint's url, event types, description or status; what is not given stays. Each
   * change commits with its event: `webhook_endpoint.updated` (url, types, description), and
   * `webhook_endpoint.disabled` or `.enabled`. Disabling fails its pending deliveries (attempts in
   * flight end as they end); enabling sends it the events that happen from then on (a delivery
   * failed meanwhile is sent again by retrying it). The news goes to the endpoints as they were
   * before the change, but a disabled one is not sent its own disabling (nor an enabled one its
   * enabling). Nothing to change is no change: no write, no event.
   */
  async update(
    p: Principal,
    id: string,
    input: { url?: string | undefined; events?: EventChoice[] | undefined; description?: string | null | undefined; status?: WebhookEndpointStatus | undefined },
  ): Promise<WebhookEndpoint> {
    const url = input.url === undefined ? undefined : await checkedUrl(input.url, this.deps.config.webhooks);
    return this.change(p, id, (endpoint, now) => {
      const next: WebhookEndpoint = {
        ...endpoint,
        url: url ?? endpoint.url,
        events: input.events ? eventsColumn(input.events) : endpoint.events,
        description: input.description === undefined ? endpoint.description : input.description,
        status: input.status ?? endpoint.status,
        updated_at: now,
      };
      const edited = next.url !== endpoint.url || next.events !== endpoint.events || next.description !== endpoint.description;
      const toggled = next.status !== endpoint.status;
      if (!edited && !toggled) return null;
      const scope = { accountId: p.accountId, mode: p.mode, actor: actorOf(p) };
      const steps: Statement[] = [
        {
          sql: "UPDATE webhook_endpoints SET url = ?, events = ?, description = ?, status = ?, updated_at = ? WHERE id = ? AND updated_at = ? AND status = ?",
          params: [next.url, next.events, next.description, next.status, now, endpoint.id, endpoint.updated_at, endpoint.status],
          expect: 1,
        },
      ];
      if (toggled && next.status === "disabled") steps.push(failPendingStatement(endpoint.id, "not sent: the endpoint was disabled", now));
      const events: NewEvent[] = [
        ...(edited ? [{ ...scope, type: "webhook_endpoint.updated" as const, object: endpointView(next) }] : []),
        ...(toggled ? [{ ...scope, type: `webhook_endpoint.${next.status}` as const, object: endpointView(next) }] : []),
      ];
      return { steps, events, next, fanOut: next.status === "disabled" && toggled ? "after" : "before" };
    });
  }

  /**
   * A new signing secret, shown in this answer only. For `expirePreviousInSeconds` (default 24 h)
   * every delivery carries a second signature with the secret it replaces, so receivers switch
   * without failing one; a rotation during that overlap ends the older secret's at once (one
   * previous secret at a time). Announced by `webhook_endpoint.secret_rotated` (without secrets).
   */
  rotateSecret(p: Principal, id: string, expirePreviousInSeconds = DEFAULT_PREVIOUS_SECRET_SECONDS): Promise<WebhookEndpoint> {
    return this.change(p, id, (endpoint, now) => {
      const overlap = expirePreviousInSeconds > 0;
      const next: WebhookEndpoint = {
        ...endpoint,
        secret: newSecret(),
        previous_secret: overlap ? endpoint.secret : null,
        previous_secret_expires_at: overlap ? now + expirePreviousInSeconds * 1000 : null,
        updated_at: now,
      };
      const step: Statement = {
        sql: "UPDATE webhook_endpoints SET secret = ?, previous_secret = ?, previous_secret_expires_at = ?, updated_at = ? WHERE id = ? AND secret = ?",
        params: [next.secret, next.previous_secret, next.previous_secret_expires_at, now, endpoint.id, endpoint.secret],
        expect: 1,
      };
      const event: NewEvent = { accountId: p.accountId, mode: p.mode, type: "webhook_endpoint.secret_rotated", object: endpointView(next), actor: actorOf(p) };
      return { steps: [step], events: [event], next };
    });
  }

  /**
   * Reads the endpoint and commits `make`'s change of it, conditional on what was read; if a
   * concurrent change got there first, reads it again and makes the change anew (each miss is
   * another change committed, so concurrent changes all land, one after the other). `now` is after
   * the endpoint's updated_at, so each change moves it forward.
   */
  private async change(p: Principal, id: string, make: (endpoint: WebhookEndpoint, now: number) => EndpointChange | null): Promise<WebhookEndpoint> {
    for (;;) {
      const endpoint = await this.get(p, id);
      const change = make(endpoint, Math.max(Date.now(), endpoint.updated_at + 1));
      if (!change) return endpoint;
      if (await commitWithEvents(this.deps.ds, change.steps, change.events, change.fanOut === "after" ? "change_first" : "events_first", [lockEndpointsOf(p.accountId)]))
        return change.next;
    }
  }

  /**
   * Deletes the endpoint and its deliveries: nothing more is sent to it, attempts in flight aside.
   * A `webhook_endpoint.deleted` event commits with it (once: a concurrent delete that got there
   * first leaves this one nothing to delete and nothing to announce).
   */
  async remove(p: Principal, id: string): Promise<void> {
    const endpoint = await this.get(p, id);
    await commitWithEvents(
      this.deps.ds,
      [
        { sql: "DELETE FROM webhook_deliveries WHERE endpoint_id = ?", params: [endpoint.id] },
        { sql: "DELETE FROM webhook_endpoints WHERE id = ?", params: [endpoint.id], expect: 1 },
      ],
      [{ accountId: p.accountId, mode: p.mode, type: "webhook_endpoint.deleted", object: endpointView(endpoint), actor: actorOf(p) }],
      "change_first",
      [lockEndpointsOf(p.accountId)],
    );
  }

  async deliveries(p: Principal, endpointId: string, status: WebhookDeliveryStatus | undefined, page: PageQuery): Promise<Page<WebhookDelivery>> {
    const endpoint = await this.get(p, endpointId);
    return pageOf(this.deliveryRepo, { account_id: p.accountId, mode: p.mode }, { endpoint_id: endpoint.id, status }, page, undefined, { index: "ix_webhook_deliveries_endpoint" });
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
    const endpoint = await this.get(p, endpointId);
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
        [lockEndpointsOf(p.accountId)],
      );
    // Together, or (when one of them missed) each on its own.
    if (!(await commit(changes)) && changes.length > 1) for (const change of changes) await commit([change]);
    return (await this.deliveryRepo.findOneBy({ id: delivery.id }))!;
  }
}
