/**
 * Errors of the SDK. Every failure is a {@link CardctlError}; `instanceof` one of the subclasses
 * (or a switch on `code`) tells them apart.
 */

/** Fields of a {@link CardctlError}. */
export interface CardctlErrorInit {
  status?: number | undefined;
  code: string;
  message: string;
  details?: Record<string, unknown> | undefined;
  requestId?: string | undefined;
  headers?: Headers | undefined;
  cause?: unknown;
}

/** Any error of the cardctl API or of the SDK talking to it. */
export class CardctlError extends Error {
  /** HTTP status; undefined when no response arrived (network, timeout, abort). */
  readonly status: number | undefined;
  /** Machine-readable code: `error.code` of the API (`unauthorized`, `policy_violation`, …) or an SDK code (`connection_error`, `timeout`, …). */
  readonly code: string;
  /** Code-specific data from `error.details` of the API, `{}` when there is none. */
  readonly details: Record<string, unknown>;
  /** `req_…` of the failed request (the `Request-Id` header); quote it when reporting a problem. */
  readonly requestId: string | undefined;
  /** Response headers, when a response arrived. */
  readonly headers: Headers | undefined;
  /**
   * The Idempotency-Key a failed POST was sent under (yours, or the one the SDK made): when the
   * outcome is unknown (a timeout, a 5xx, 409 `idempotency_key_in_use`), the same call again with
   * `{ idempotencyKey }` set to it gets the first request's answer, and does the work at most once.
   */
  idempotencyKey: string | undefined;

  constructor(init: CardctlErrorInit) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = new.target.name;
    this.status = init.status;
    this.code = init.code;
    this.details = init.details ?? {};
    this.requestId = init.requestId;
    this.headers = init.headers;
  }
}

/** 401 `unauthorized`: the API key is missing, invalid or revoked. */
export class AuthenticationError extends CardctlError {}

/** 403 `forbidden`: the key may not do this (an `agent` key approving, a live key on a test helper, …). */
export class PermissionError extends CardctlError {}

/** 403 `setup_required`: the account must finish set-up before cards can be created. */
export class SetupRequiredError extends PermissionError {
  /** What is missing: `"kyb"`, `"payment_method"` and/or (on Stripe) `"cardholder"`. */
  readonly missing: string[];
  /** Where a human completes the set-up. */
  readonly setupUrl: string | undefined;
  constructor(init: CardctlErrorInit) {
    super(init);
    const d = this.details;
    this.missing = Array.isArray(d.missing) ? d.missing.map(String) : [];
    this.setupUrl = typeof d.setup_url === "string" ? d.setup_url : undefined;
  }
}

/** 403 `policy_violation`: the amount exceeds the effective policy maximum. */
export class PolicyViolationError extends PermissionError {
  /** The effective maximum in cents. */
  readonly maxAmountCents: number | undefined;
  /** The requested amount in cents. */
  readonly requested: number | undefined;
  constructor(init: CardctlErrorInit) {
    super(init);
    const d = this.details;
    this.maxAmountCents = typeof d.max_amount_cents === "number" ? d.max_amount_cents : undefined;
    this.requested = typeof d.requested === "number" ? d.requested : undefined;
  }
}

/**
 * 402 `payment_method_declined`: the account's payment method refused the card's hold (creating a
 * card, approving a request); nothing was held or minted. Fixing the payment method fixes it.
 */
export class PaymentDeclinedError extends CardctlError {
  /** The processor's decline code (`card_declined`, `insufficient_funds`, …), if it gave one. */
  readonly declineCode: string | undefined;
  constructor(init: CardctlErrorInit) {
    super(init);
    this.declineCode = typeof this.details.decline_code === "string" ? this.details.decline_code : undefined;
  }
}

/** 404 `not_found`: no such object for this key (unknown id, other account, other mode). */
export class NotFoundError extends CardctlError {}

/** 409: `approval_not_pending` (see `details.status`), or `idempotency_key_in_use` after the retries ran out. */
export class ConflictError extends CardctlError {}

/** 400 / 422 (and 413): invalid input; `details.issues` lists `{path, message}`; 422 `idempotency_key_reused`. */
export class ValidationError extends CardctlError {}

/** 429 `rate_limited`: the key's hourly budget is spent and waiting was not allowed (see `maxRetryWaitMs`). */
export class RateLimitError extends CardctlError {
  /** When the window resets (from `Retry-After` / `RateLimit-Reset`), if the server said. */
  readonly resetAt: Date | undefined;
  /** Milliseconds from the response until the reset, if known. */
  readonly retryAfterMs: number | undefined;
  constructor(init: CardctlErrorInit & { retryAfterMs?: number | undefined }) {
    super(init);
    this.retryAfterMs = init.retryAfterMs;
    this.resetAt = init.retryAfterMs === undefined ? undefined : new Date(Date.now() + init.retryAfterMs);
  }
}

/** 502 `processor_error` / 503 `processor_not_configured`: the card processor failed; nothing was held or minted. */
export class ProcessorError extends CardctlError {}

/** Any other 5xx (`internal_error`), after the retries ran out. */
export class InternalServerError extends CardctlError {}

/** No response: DNS, refused or dropped connection, TLS, … (after the retries ran out). */
export class APIConnectionError extends CardctlError {}

/** A request took longer than `timeoutMs` (after the retries ran out). */
export class TimeoutError extends APIConnectionError {}

/** The caller's AbortSignal fired. */
export class UserAbortError extends CardctlError {}

/** `waitForDecision` / `createAndWait`: no decision within `timeoutMs`; the approval is still pending. */
export class DecisionTimeoutError extends CardctlError {
  /** The approval that is still pending. */
  readonly approvalId: string;
  constructor(approvalId: string, timeoutMs: number) {
    super({ code: "decision_timeout", message: `No decision on ${approvalId} within ${timeoutMs} ms; it is still pending.`, details: { approval_id: approvalId } });
    this.approvalId = approvalId;
  }
}

/** Builds the subclass that fits an error response. */
export function errorFromResponse(
  status: number,
  body: unknown,
  headers: Headers,
  extra: { retryAfterMs?: number | undefined } = {},
): CardctlError {
  const envelope = (body as { error?: { code?: unknown; message?: unknown; details?: unknown; request_id?: unknown } } | null)?.error;
  const code = typeof envelope?.code === "string" ? envelope.code : `http_${status}`;
  const message =
    typeof envelope?.message === "string"
      ? envelope.message
      : `HTTP ${status}${typeof body === "string" && body ? `: ${body.slice(0, 200)}` : ""}`;
  const details =
    envelope?.details && typeof envelope.details === "object" ? (envelope.details as Record<string, unknown>) : undefined;
  const requestId = typeof envelope?.request_id === "string" ? envelope.request_id : (headers.get("request-id") ?? undefined);
  const init: CardctlErrorInit = { status, code, message, details, requestId, headers };

  if (status === 401) return new AuthenticationError(init);
  if (status === 402 && code === "payment_method_declined") return new PaymentDeclinedError(init);
  if (status === 403) {
    if (code === "setup_required") return new SetupRequiredError(init);
    if (code === "policy_violation") return new PolicyViolationError(init);
    return new PermissionError(init);
  }
  if (status === 404) return new NotFoundError(init);
  if (status === 409) return new ConflictError(init);
  if (status === 400 || status === 413 || status === 415 || status === 422) return new ValidationError(init);
  if (status === 429) return new RateLimitError({ ...init, retryAfterMs: extra.retryAfterMs });
  if (status === 502 || status === 503 || code === "processor_error" || code === "processor_not_configured")
    return new ProcessorError(init);
  if (status >= 500) return new InternalServerError(init);
  return new CardctlError(init);
}
