import { HttpClient, sleepUntil, type ClientOptions, type RequestOptions } from "./core.js";
import { APIConnectionError, CardctlError, DecisionTimeoutError, InternalServerError, NotFoundError, ProcessorError, RateLimitError, UserAbortError } from "./errors.js";
import { PagePromise } from "./pagination.js";
import { streamEvents, type EventStreamOptions } from "./event-stream.js";
import type {
  Approval,
  ApprovalListParams,
  ApprovalRejectParams,
  ApprovalRejectResult,
  Authorization,
  Balance,
  Card,
  CardCloseResult,
  CardCreateParams,
  CardCreateResult,
  CardCreated,
  CardDetail,
  CardListParams,
  CardRetrieveParams,
  CreatedWebhookEndpoint,
  CurrentApiKey,
  DeletedWebhookEndpoint,
  Event,
  EventListParams,
  ListByCardParams,
  ListResponse,
  Policy,
  PolicyCheckParams,
  PolicyCheckResult,
  PolicyUpdateParams,
  PurchaseParams,
  PurchaseResult,
  RevealedCard,
  TestAuthorizeParams,
  TestCaptureParams,
  TestRefundParams,
  Transaction,
  WebhookDelivery,
  WebhookDeliveryListParams,
  WebhookEndpoint,
  WebhookEndpointCreateParams,
  WebhookEndpointUpdateParams,
  WebhookSecretRotateParams,
  WebhookEndpointListParams,
} from "./types.js";

/**
 * List parameters as the SDK takes them: the contract's query type, with `limit` narrowed to a
 * number (the contract coerces query strings, so its own input type for `limit` is `unknown`).
 */
export type ListParams<P> = Omit<P, "limit" | "starting_after"> & {
  /** Page size, 1..100 (server default 20). */
  limit?: number | undefined;
  /** Cursor: start after this id (set automatically when paging). */
  starting_after?: string | undefined;
};

/** Query of `cards.list`. */
export type CardListQuery = ListParams<CardListParams>;
/** Query of `approvals.list`. */
export type ApprovalListQuery = ListParams<ApprovalListParams>;
/** Query of `authorizations.list` and `transactions.list`. */
export type ListByCardQuery = ListParams<ListByCardParams>;
/** Query of `events.list`. */
export type EventListQuery = ListParams<EventListParams>;
/** Query of `webhookEndpoints.list`. */
export type WebhookEndpointListQuery = ListParams<WebhookEndpointListParams>;
/** Query of `webhookEndpoints.deliveries`. */
export type WebhookDeliveryListQuery = ListParams<WebhookDeliveryListParams>;

/** How an approval request ended. */
export type ApprovalDecision =
  | { status: "APPROVED"; approval: Approval; card: CardDetail }
  | { status: "REJECTED"; approval: Approval }
  | { status: "EXPIRED"; approval: Approval };

/**
 * An approval request as it stands (`approvals.decision`): decided, or `PENDING` while nobody has
 * decided and while an approved request's card is still being created (`approval.status` is then
 * `APPROVED`).
 */
export type ApprovalState = ApprovalDecision | { status: "PENDING"; approval: Approval };

/**
 * Result of `cards.createAndWait`: a usable card (`approval` is null when the policy needed no
 * approval), or the approval request that was rejected or expired.
 */
export type CreateAndWaitResult =
  | { status: "APPROVED"; approval: Approval | null; card: CardDetail }
  | { status: "REJECTED"; approval: Approval }
  | { status: "EXPIRED"; approval: Approval };

/** Options of `approvals.waitForDecision` and `cards.createAndWait`. */
export interface WaitOptions {
  /** Give up after this many milliseconds with {@link DecisionTimeoutError} (default: wait until the approval's own expiry decides). */
  timeoutMs?: number | undefined;
  /** Cancels the wait; it then rejects with {@link UserAbortError}. */
  signal?: AbortSignal | undefined;
  /** Delay between polls in milliseconds. Default: 1 s, growing by half each poll up to 15 s. */
  pollIntervalMs?: number | undefined;
}

const seg = (id: string) => encodeURIComponent(id);

/** Cards: create, list, get (with an ephemeral key to reveal the number), close. */
export class Cards {
  /** @internal Use `new Cardctl(...).cards`. */
  constructor(
    private readonly http: HttpClient,
    private readonly client: Cardctl,
  ) {}

  /**
   * Requests a single-use card (`POST /v1/cards`). Resolves to the issued card (status `OPEN`,
   * HTTP 201) or, when the policy needs a human, to `{ status: "PENDING_APPROVAL", approval_id,
   * expires_at }` (HTTP 202): switch on `status`. Sent with an Idempotency-Key, so retries never
   * make a second card or hold.
   * @throws {SetupRequiredError} the account's set-up is incomplete (`missing`, `setupUrl`).
   * @throws {PolicyViolationError} the amount exceeds the policy maximum (`maxAmountCents`, `requested`).
   */
  create(params: CardCreateParams, options?: RequestOptions): Promise<CardCreateResult> {
    return this.http.request({ method: "POST", path: "/cards", body: params, options });
  }

  /**
   * Lists cards, newest first (`GET /v1/cards`). `await` it for one page (`data`, `has_more`,
   * `getNextPage()`), or `for await (const card of client.cards.list({ status: "OPEN" }))` to walk
   * every page.
   */
  list(params: CardListQuery = {}, options?: RequestOptions): PagePromise<Card> {
    return new PagePromise<Card>((cursor) =>
      this.http.request<ListResponse<Card>>({
        method: "GET",
        path: "/cards",
        query: { ...params, starting_after: cursor ?? params.starting_after },
        options,
      }),
    );
  }

  /**
   * Gets one card (`GET /v1/cards/{id}`) with `ephemeral_key_secret`, the short-lived secret the
   * processor's client-side library uses to reveal PAN and CVV. The API never returns the number itself.
   * @param params.nonce passed through to the processor's ephemeral key (Stripe Issuing Elements).
   * @throws {NotFoundError} no such card for this key.
   */
  get(id: string, params: CardRetrieveParams = {}, options?: RequestOptions): Promise<CardDetail> {
    return this.http.request({ method: "GET", path: `/cards/${seg(id)}`, query: { ...params }, options });
  }

  /**
   * Reveals the card's number and CVC, straight from the card processor: gets the card with a
   * fresh ephemeral key (`GET /v1/cards/{id}`), then reads the card from the processor with that
   * key (`card.reveal.url`: Stripe's issuing card API as Issuing Elements calls it, or the simulated
   * processor's endpoint on the server) with `expand[]=number&expand[]=cvc`. The number never passes
   * through the cardctl API. Treat the result as a secret.
   * @throws {NotFoundError} no such card for this key.
   * @throws {AuthenticationError} the processor refused the ephemeral key (expired, another card's).
   * @throws {CardctlError} `reveal_mismatch`: the processor's answer does not match the card.
   */
  async reveal(id: string, options?: RequestOptions): Promise<RevealedCard> {
    const card = await this.get(id, {}, options);
    const headers: Record<string, string> = { authorization: `Bearer ${card.ephemeral_key_secret}` };
    if (card.reveal.api_version) headers["stripe-version"] = card.reveal.api_version;
    const sep = card.reveal.url.includes("?") ? "&" : "?";
    const raw = (await this.http.getFromProcessor(`${card.reveal.url}${sep}expand[]=number&expand[]=cvc`, headers, options)) as Record<string, unknown> | null;
    const number = typeof raw?.number === "string" ? raw.number : "";
    const cvc = typeof raw?.cvc === "string" ? raw.cvc : "";
    const exp_month = Number(raw?.exp_month);
    const exp_year = Number(raw?.exp_year);
    if (!/^\d{12,19}$/.test(number) || !/^\d{3,4}$/.test(cvc) || !Number.isInteger(exp_month) || !Number.isInteger(exp_year) || number.slice(-4) !== card.last_four)
      throw new CardctlError({ code: "reveal_mismatch", message: `The processor's answer for card ${card.id} is not its number and CVC (expected last four ${card.last_four}).` });
    return { number, cvc, exp_month, exp_year, last_four: number.slice(-4) };
  }

  /**
   * Closes a card (`POST /v1/cards/{id}/close`): revokes it at the processor and releases its hold
   * if still open. Idempotent: closing a closed card succeeds.
   * @throws {NotFoundError} no such card for this key.
   */
  close(id: string, options?: RequestOptions): Promise<CardCloseResult> {
    return this.http.request({ method: "POST", path: `/cards/${seg(id)}/close`, options });
  }

  /**
   * For agents: creates a card and, when a human must approve it, waits for the decision.
   * Resolves to `{ status: "APPROVED", card }` with the full card (including
   * `ephemeral_key_secret`; `approval` is null when no approval was needed), or to
   * `{ status: "REJECTED" | "EXPIRED", approval }`. `wait.timeoutMs` bounds the wait for a human,
   * counted from the call; the create and the card's fetch are HTTP calls bounded (and retried) as
   * any other, by the client's `timeoutMs` and `maxRetries`.
   * @throws {DecisionTimeoutError} no decision within `wait.timeoutMs`.
   */
  async createAndWait(
    params: CardCreateParams,
    wait: WaitOptions & { idempotencyKey?: string | undefined } = {},
  ): Promise<CreateAndWaitResult> {
    const started = Date.now();
    const created = await this.create(params, { signal: wait.signal, idempotencyKey: wait.idempotencyKey });
    if (created.status !== "PENDING_APPROVAL") {
      const card = await this.get(created.id, {}, { signal: wait.signal });
      return { status: "APPROVED", approval: null, card };
    }
    const timeoutMs = wait.timeoutMs === undefined ? undefined : Math.max(0, wait.timeoutMs - (Date.now() - started));
    return this.client.approvals.waitForDecision(created.approval_id, { ...wait, timeoutMs });
  }
}

/** The spend summary. */
export class BalanceResource {
  /** @internal Use `new Cardctl(...).balance`. */
  constructor(private readonly http: HttpClient) {}

  /** Gets the spend summary (`GET /v1/balance`): held amount, open cards, pending approvals, policy and set-up state. */
  retrieve(options?: RequestOptions): Promise<Balance> {
    return this.http.request({ method: "GET", path: "/balance", options });
  }
}

/** The API key the client sends. */
export class ApiKeys {
  /** @internal Use `new Cardctl(...).apiKeys`. */
  constructor(private readonly http: HttpClient) {}

  /** Gets the key making the request (`GET /v1/api_keys/current`): `id`, `account_id`, `mode` and `role` (`full` or `agent`). */
  current(options?: RequestOptions): Promise<CurrentApiKey> {
    return this.http.request({ method: "GET", path: "/api_keys/current", options });
  }
}

/** The default spending policy. */
export class Policies {
  /** @internal Use `new Cardctl(...).policies`. */
  constructor(private readonly http: HttpClient) {}

  /** Gets the default policy (`GET /v1/policies/default`). */
  retrieveDefault(options?: RequestOptions): Promise<Policy> {
    return this.http.request({ method: "GET", path: "/policies/default", options });
  }

  /**
   * Updates the default policy (`PUT /v1/policies/default`); members left out keep their value.
   * Resolves to the resulting policy.
   * @throws {PermissionError} with an `agent` key: agents cannot loosen their own policy.
   */
  updateDefault(params: PolicyUpdateParams, options?: RequestOptions): Promise<Policy> {
    return this.http.request({ method: "PUT", path: "/policies/default", body: params, options });
  }

  /**
   * Dry run of `cards.create` (`POST /v1/policies/check`): resolves to what creating a card with
   * this request would do now, `decision` `"issue"`, `"approval_required"` or `"denied"`, with the
   * `reasons` (`setup_required`, `amount_over_max`, `approval_required`, each with its `details`)
   * and the `effective_policy`. Makes no card, approval or hold; a denial is a result, not an error.
   * @throws {ValidationError} invalid input, as for `cards.create`.
   */
  check(params: PolicyCheckParams, options?: RequestOptions): Promise<PolicyCheckResult> {
    return this.http.request({ method: "POST", path: "/policies/check", body: params, options });
  }
}

/** Approval requests: list, approve, reject, and wait for a human's decision. */
export class Approvals {
  /** @internal Use `new Cardctl(...).approvals`. */
  constructor(
    private readonly http: HttpClient,
    private readonly client: Cardctl,
  ) {}

  /**
   * Lists approval requests, newest first (`GET /v1/approvals`); `status` defaults to `PENDING`.
   * Awaitable for one page, or iterable with `for await` across every page.
   */
  list(params: ApprovalListQuery = {}, options?: RequestOptions): PagePromise<Approval> {
    return new PagePromise<Approval>((cursor) =>
      this.http.request<ListResponse<Approval>>({
        method: "GET",
        path: "/approvals",
        query: { ...params, starting_after: cursor ?? params.starting_after },
        options,
      }),
    );
  }

  /**
   * Gets one approval request (`GET /v1/approvals/{id}`), its expiry applied.
   * @throws {NotFoundError} no such approval for this key.
   */
  retrieve(id: string, options?: RequestOptions): Promise<Approval> {
    return this.http.request({ method: "GET", path: `/approvals/${seg(id)}`, options });
  }

  /**
   * Approves a pending request (`POST /v1/approvals/{id}/approve`): the hold and mint run now, and
   * the new card is returned. Needs a `full` key.
   * @throws {ConflictError} `approval_not_pending` (already decided or expired; see `details.status`).
   * @throws {PermissionError} with an `agent` key.
   */
  approve(id: string, options?: RequestOptions): Promise<CardCreated> {
    return this.http.request({ method: "POST", path: `/approvals/${seg(id)}/approve`, options });
  }

  /**
   * Rejects a pending request (`POST /v1/approvals/{id}/reject`), with an optional reason.
   * Needs a `full` key.
   * @throws {ConflictError} `approval_not_pending`.
   */
  reject(id: string, params: ApprovalRejectParams = {}, options?: RequestOptions): Promise<ApprovalRejectResult> {
    return this.http.request({ method: "POST", path: `/approvals/${seg(id)}/reject`, body: params, options });
  }

  /**
   * Where an approval request stands now, in one or two requests (`GET /v1/approvals/{id}`, then
   * `GET /v1/cards/{card_id}` once approved): `{ status: "APPROVED", approval, card }`, `{ status:
   * "REJECTED" | "EXPIRED", approval }`, or `{ status: "PENDING", approval }`, also while an
   * approved request's card is still being created (the card shows once it is `OPEN`; if its
   * creation fails, the request goes back to `PENDING`).
   * @throws {NotFoundError} no such approval for this key.
   */
  async decision(id: string, options?: RequestOptions): Promise<ApprovalState> {
    const approval = await this.retrieve(id, options);
    if (approval.status === "PENDING") return { status: "PENDING", approval };
    if (approval.status !== "APPROVED") return { status: approval.status, approval };
    if (!approval.card_id) throw new CardctlError({ code: "missing_card_id", message: `Approval ${id} is APPROVED but names no card.` });
    try {
      return { status: "APPROVED", approval, card: await this.client.cards.get(approval.card_id, {}, options) };
    } catch (err) {
      if (err instanceof NotFoundError) return { status: "PENDING", approval };
      throw err;
    }
  }

  /**
   * Polls until a human decides (or the request expires): resolves to `{ status: "APPROVED",
   * approval, card }` (the card as `cards.get` returns it, with `ephemeral_key_secret`), or to
   * `{ status: "REJECTED" | "EXPIRED", approval }`. Transient failures while polling (network,
   * 429, 5xx) are ridden out until `timeoutMs`.
   * @throws {DecisionTimeoutError} still pending after `timeoutMs`.
   * @throws {UserAbortError} `signal` fired.
   * @throws {NotFoundError} no such approval for this key.
   */
  async waitForDecision(id: string, options: WaitOptions = {}): Promise<ApprovalDecision> {
    const { signal, timeoutMs, pollIntervalMs } = options;
    const deadline = timeoutMs === undefined ? Infinity : Date.now() + timeoutMs;
    const controller = new AbortController();
    const onAbort = () => controller.abort(signal?.reason);
    // Aborted, the error names the approval (still pending), so a caller that only logs it can wait again.
    const aborted = () => new UserAbortError({ code: "aborted", message: `The wait for ${id} was aborted; it is still pending.`, details: { approval_id: id }, cause: signal?.reason });
    if (signal?.aborted) throw aborted();
    signal?.addEventListener("abort", onAbort, { once: true });
    const timer = Number.isFinite(deadline) ? setTimeout(() => controller.abort(), Math.max(0, deadline - Date.now())) : undefined;
    const opts: RequestOptions = { signal: controller.signal };
    let interval = pollIntervalMs ?? 1000;
    try {
      for (;;) {
        let serverWaitMs = 0;
        try {
          const state = await this.decision(id, opts);
          if (state.status !== "PENDING") return state;
        } catch (err) {
          if (err instanceof UserAbortError && !signal?.aborted) throw new DecisionTimeoutError(id, timeoutMs ?? 0);
          if (!isTransient(err)) throw err;
          // Rate limited: polling before the window resets would only be refused again.
          if (err instanceof RateLimitError) serverWaitMs = err.retryAfterMs ?? 0;
        }
        if (Date.now() >= deadline) throw new DecisionTimeoutError(id, timeoutMs ?? 0);
        try {
          await sleepUntil(Math.min(deadline, Date.now() + Math.max(interval, serverWaitMs)), controller.signal);
        } catch (err) {
          if (signal?.aborted) throw err;
          throw new DecisionTimeoutError(id, timeoutMs ?? 0);
        }
        // Slept to the deadline (timers may wake a little early): a poll now would be cut off by it.
        if (deadline - Date.now() < 10) throw new DecisionTimeoutError(id, timeoutMs ?? 0);
        if (pollIntervalMs === undefined) interval = Math.min(15_000, interval * 1.5);
      }
    } catch (err) {
      throw signal?.aborted && err instanceof UserAbortError ? aborted() : err;
    } finally {
      if (timer !== undefined) clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
    }
  }
}

const isTransient = (err: unknown) =>
  err instanceof APIConnectionError ||
  err instanceof RateLimitError ||
  err instanceof InternalServerError ||
  (err instanceof ProcessorError && err.status !== 503);

/** A list of the card money lifecycle (`GET /v1/authorizations`, `GET /v1/transactions`), newest first. */
class LifecycleList<T extends { id: string }> {
  /** @internal */
  constructor(
    private readonly http: HttpClient,
    private readonly path: string,
  ) {}

  /**
   * Lists newest first; `card_id` keeps one card's. `await` it for one page, or `for await` to walk
   * every page.
   */
  list(params: ListByCardQuery = {}, options?: RequestOptions): PagePromise<T> {
    return new PagePromise<T>((cursor) =>
      this.http.request<ListResponse<T>>({ method: "GET", path: this.path, query: { ...params, starting_after: cursor ?? params.starting_after }, options }),
    );
  }
}

/** Authorizations: every merchant request on a card, approved or declined, with its reason. */
export class Authorizations extends LifecycleList<Authorization> {}
/** Transactions: what settled on cards (captures) and came back (refunds). */
export class Transactions extends LifecycleList<Transaction> {}

/** The account's events (kept 30 days): list, get, and a live stream. */
export class Events {
  /** @internal Use `new Cardctl(...).events`. */
  constructor(private readonly http: HttpClient) {}

  /** Lists events newest first (`GET /v1/events`), `type` filters; `await` for one page or `for await` for all. */
  list(params: EventListQuery = {}, options?: RequestOptions): PagePromise<Event> {
    return new PagePromise<Event>((cursor) =>
      this.http.request<ListResponse<Event>>({ method: "GET", path: "/events", query: { ...params, starting_after: cursor ?? params.starting_after }, options }),
    );
  }

  /**
   * Gets one event (`GET /v1/events/{id}`).
   * @throws {NotFoundError} no such event for this key (or older than 30 days).
   */
  get(id: string, options?: RequestOptions): Promise<Event> {
    return this.http.request({ method: "GET", path: `/events/${seg(id)}`, options });
  }

  /**
   * The account's new events as they happen (`GET /v1/events/stream`, Server-Sent Events):
   * `for await (const event of client.events.stream({ types: ["card.created"] }))`. Reconnects
   * after a drop, resuming after the last event; ends when `signal` fires or the loop breaks.
   * @throws {AuthenticationError} the key was refused; {@link ValidationError} unknown types.
   */
  stream(options: EventStreamOptions = {}): AsyncGenerator<Event, void, undefined> {
    return streamEvents(this.http, options);
  }
}

/** Outgoing webhooks (full-role keys): endpoints that receive the account's events, signed; their deliveries. */
export class WebhookEndpoints {
  /** @internal Use `new Cardctl(...).webhookEndpoints`. */
  constructor(private readonly http: HttpClient) {}

  /**
   * Creates an endpoint (`POST /v1/webhook_endpoints`) for `events` (types, or `["*"]`) of the key's
   * mode. The answer carries `secret` (`whsec_…`), shown this once: verify deliveries with it, e.g.
   * `new Webhook(secret).verify(body, headers)` of the `standardwebhooks` package.
   * @throws {ValidationError} a URL that is not https or resolves to a private address, unknown types.
   */
  create(params: WebhookEndpointCreateParams, options?: RequestOptions): Promise<CreatedWebhookEndpoint> {
    return this.http.request({ method: "POST", path: "/webhook_endpoints", body: params, options });
  }

  /** Lists endpoints newest first (`GET /v1/webhook_endpoints`); `await` for one page or `for await` for all. */
  list(params: WebhookEndpointListQuery = {}, options?: RequestOptions): PagePromise<WebhookEndpoint> {
    return new PagePromise<WebhookEndpoint>((cursor) =>
      this.http.request<ListResponse<WebhookEndpoint>>({ method: "GET", path: "/webhook_endpoints", query: { ...params, starting_after: cursor ?? params.starting_after }, options }),
    );
  }

  /**
   * Retrieves an endpoint (`GET /v1/webhook_endpoints/{id}`).
   * @throws {NotFoundError} no such endpoint for this key.
   */
  get(id: string, options?: RequestOptions): Promise<WebhookEndpoint> {
    return this.http.request({ method: "GET", path: `/webhook_endpoints/${seg(id)}`, options });
  }

  /**
   * Changes an endpoint (`POST /v1/webhook_endpoints/{id}`): only the fields given. `status: "disabled"`
   * stops its deliveries (pending ones fail); `"enabled"` resumes them with the events from then on.
   * @throws {ValidationError} a URL that is not https or resolves to a private address, unknown types.
   */
  update(id: string, params: WebhookEndpointUpdateParams, options?: RequestOptions): Promise<WebhookEndpoint> {
    return this.http.request({ method: "POST", path: `/webhook_endpoints/${seg(id)}`, body: params, options });
  }

  /**
   * Replaces the signing secret (`POST /v1/webhook_endpoints/{id}/rotate_secret`); the answer's
   * `secret` is the new one, shown this once. Until `previous_secret_expires_at` (default 24 h on)
   * deliveries carry a signature with each secret, so a receiver verifies with either while it switches.
   */
  rotateSecret(id: string, params: WebhookSecretRotateParams = {}, options?: RequestOptions): Promise<CreatedWebhookEndpoint> {
    return this.http.request({ method: "POST", path: `/webhook_endpoints/${seg(id)}/rotate_secret`, body: params, options });
  }

  /**
   * Deletes an endpoint and its deliveries (`DELETE /v1/webhook_endpoints/{id}`). A retry that
   * finds it gone after an attempt whose answer was lost resolves as deleted.
   * @throws {NotFoundError} no such endpoint for this key (or already deleted).
   */
  del(id: string, options?: RequestOptions): Promise<DeletedWebhookEndpoint> {
    return this.http.request({ method: "DELETE", path: `/webhook_endpoints/${seg(id)}`, options, goneAfterRetry: () => ({ id, deleted: true as const }) });
  }

  /** Lists an endpoint's deliveries newest first (`GET /v1/webhook_endpoints/{id}/deliveries`), `status` filters. */
  deliveries(id: string, params: WebhookDeliveryListQuery = {}, options?: RequestOptions): PagePromise<WebhookDelivery> {
    return new PagePromise<WebhookDelivery>((cursor) =>
      this.http.request<ListResponse<WebhookDelivery>>({
        method: "GET",
        path: `/webhook_endpoints/${seg(id)}/deliveries`,
        query: { ...params, starting_after: cursor ?? params.starting_after },
        options,
      }),
    );
  }

  /**
   * Sends a delivery again now (`POST /v1/webhook_endpoints/{id}/deliveries/{delivery_id}/retry`);
   * a disabled endpoint is enabled again.
   */
  retry(id: string, deliveryId: string, options?: RequestOptions): Promise<WebhookDelivery> {
    return this.http.request({ method: "POST", path: `/webhook_endpoints/${seg(id)}/deliveries/${seg(deliveryId)}/retry`, options });
  }
}

/** Test-mode helpers (work only with `sk_test_` keys): they play the card network's part. */
export class TestHelpers {
  /** @internal Use `new Cardctl(...).testHelpers`. */
  constructor(private readonly http: HttpClient) {}

  /** A merchant asks to charge the card (`POST /v1/test_helpers/cards/{id}/authorizations`); 0 is a verification. */
  authorize(cardId: string, params: TestAuthorizeParams, options?: RequestOptions): Promise<Authorization> {
    return this.http.request({ method: "POST", path: `/test_helpers/cards/${seg(cardId)}/authorizations`, body: params, options });
  }

  /** Settles an authorization for its amount, or another (`amount_cents`): a capture transaction. */
  capture(authorizationId: string, params: TestCaptureParams = {}, options?: RequestOptions): Promise<Transaction> {
    return this.http.request({ method: "POST", path: `/test_helpers/authorizations/${seg(authorizationId)}/capture`, body: params, options });
  }

  /** The merchant reverses a pending authorization: a card it used is OPEN again. */
  reverse(authorizationId: string, options?: RequestOptions): Promise<Authorization> {
    return this.http.request({ method: "POST", path: `/test_helpers/authorizations/${seg(authorizationId)}/reverse`, options });
  }

  /** A pending authorization expires unsettled: a card it used is OPEN again. */
  expire(authorizationId: string, options?: RequestOptions): Promise<Authorization> {
    return this.http.request({ method: "POST", path: `/test_helpers/authorizations/${seg(authorizationId)}/expire`, options });
  }

  /** The merchant refunds a capture, in full or `amount_cents` of it. */
  refund(transactionId: string, params: TestRefundParams = {}, options?: RequestOptions): Promise<Transaction> {
    return this.http.request({ method: "POST", path: `/test_helpers/transactions/${seg(transactionId)}/refund`, body: params, options });
  }

  /** The processor lets the card's hold lapse: the card is closed at once. */
  expireHold(cardId: string, options?: RequestOptions): Promise<Card> {
    return this.http.request({ method: "POST", path: `/test_helpers/cards/${seg(cardId)}/expire_hold`, options });
  }

  /**
   * Simulates a purchase on a card (`POST /v1/test_helpers/cards/{id}/purchase`): an authorization
   * and its settlement in one call; the first approved purchase makes a single-use card USED.
   * Resolves to `{ approved, decline_reason, amount_cents, card }`.
   * @throws {PermissionError} with a live key.
   */
  purchase(cardId: string, params: PurchaseParams, options?: RequestOptions): Promise<PurchaseResult> {
    return this.http.request({ method: "POST", path: `/test_helpers/cards/${seg(cardId)}/purchase`, body: params, options });
  }
}

/**
 * The cardctl client.
 *
 * ```ts
 * const cardctl = new Cardctl({ apiKey: process.env.CARDCTL_API_KEY, baseUrl: "https://cards.example.com" });
 * const result = await cardctl.cards.createAndWait({ amount_cents: 2500, purpose: "API credits" });
 * ```
 */
export class Cardctl {
  /** Cards: create, list, get, close, createAndWait. */
  readonly cards: Cards;
  /** The spend summary. */
  readonly balance: BalanceResource;
  /** The key making the requests (its role). */
  readonly apiKeys: ApiKeys;
  /** The default policy. */
  readonly policies: Policies;
  /** Approval requests. */
  readonly approvals: Approvals;
  /** Authorizations on cards (the card money lifecycle). */
  readonly authorizations: Authorizations;
  /** Transactions on cards: captures and refunds. */
  readonly transactions: Transactions;
  /** Test-mode helpers (sk_test_ keys only). */
  readonly testHelpers: TestHelpers;
  /** The account's events: list, get, stream. */
  readonly events: Events;
  /** Outgoing webhooks: endpoints and their deliveries (full-role keys). */
  readonly webhookEndpoints: WebhookEndpoints;
  /** The resolved base URL (without `/v1`). */
  readonly baseUrl: string;

  /**
   * @param options `apiKey` (default `CARDCTL_API_KEY`), `baseUrl` (default `CARDCTL_BASE_URL` or
   * `http://127.0.0.1:4000`), `timeoutMs` per attempt (60 000), `maxRetries` (3),
   * `maxRetryWaitMs` (60 000), `fetch`.
   */
  constructor(options: ClientOptions = {}) {
    const http = new HttpClient(options);
    this.baseUrl = http.baseUrl;
    this.cards = new Cards(http, this);
    this.balance = new BalanceResource(http);
    this.apiKeys = new ApiKeys(http);
    this.policies = new Policies(http);
    this.approvals = new Approvals(http, this);
    this.authorizations = new Authorizations(http, "/authorizations");
    this.transactions = new Transactions(http, "/transactions");
    this.testHelpers = new TestHelpers(http);
    this.events = new Events(http);
    this.webhookEndpoints = new WebhookEndpoints(http);
  }
}
