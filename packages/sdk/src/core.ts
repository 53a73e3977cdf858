import {
  APIConnectionError,
  CardctlError,
  TimeoutError,
  UserAbortError,
  errorFromResponse,
} from "./errors.js";

/** The `fetch` the SDK calls: the global one, or any compatible implementation. */
export type Fetch = (input: string, init: RequestInit) => Promise<Response>;

/** Options of {@link Cardctl}. */
export interface ClientOptions {
  /** `sk_test_…` or `sk_live_…`. Defaults to the `CARDCTL_API_KEY` environment variable where there is one. */
  apiKey?: string | undefined;
  /** Where the service runs, e.g. `https://cards.example.com` (a trailing `/v1` is accepted). Defaults to `CARDCTL_BASE_URL`, else `http://127.0.0.1:4000`. */
  baseUrl?: string | undefined;
  /** Time limit of one HTTP attempt in milliseconds (default 60 000). */
  timeoutMs?: number | undefined;
  /** Retries after the first attempt for network errors, timeouts, 409 `idempotency_key_in_use`, 429 and 5xx (default 3). */
  maxRetries?: number | undefined;
  /**
   * Longest wait for a rate-limit window to reset (Retry-After / RateLimit-Reset) before a retry,
   * in milliseconds (default 60 000). A 429 that asks for a longer wait throws {@link RateLimitError}
   * at once (with `retryAfterMs`) instead of blocking.
   */
  maxRetryWaitMs?: number | undefined;
  /** A fetch implementation (default: `globalThis.fetch`). */
  fetch?: Fetch | undefined;
}

/** Per-call options, accepted as the last argument of every method. */
export interface RequestOptions {
  /** Cancels the call (and its retries and waits); the call then rejects with {@link UserAbortError}. */
  signal?: AbortSignal | undefined;
  /** Overrides the client's `timeoutMs` for each attempt of this call. */
  timeoutMs?: number | undefined;
  /** Overrides the client's `maxRetries` for this call. */
  maxRetries?: number | undefined;
  /** POST only: the Idempotency-Key (1..199 chars). Generated when absent; the same key is sent on every retry of the call. */
  idempotencyKey?: string | undefined;
}

interface RequestSpec<T = unknown> {
  method: "GET" | "POST" | "PUT" | "DELETE";
  path: string;
  query?: Record<string, string | number | boolean | undefined | null> | undefined;
  body?: unknown;
  options?: RequestOptions | undefined;
  /**
   * A DELETE's answer when a retry finds the object gone (404) after an attempt whose answer was
   * lost (the network, a time-out, a 5xx): that attempt most likely deleted it.
   */
  goneAfterRetry?: () => T;
}

const env = (name: string): string | undefined =>
  (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env?.[name] || undefined;

const BASE_DELAY_MS = 500;
const MAX_DELAY_MS = 8000;

/** Exponential backoff with jitter: 0.5 s, 1 s, 2 s, … (capped at 8 s), each scaled by a random 50..100 %. */
export function backoffMs(retry: number): number {
  const ceiling = Math.min(MAX_DELAY_MS, BASE_DELAY_MS * 2 ** retry);
  return ceiling * (0.5 + Math.random() * 0.5);
}

/** Milliseconds the server's Retry-After (seconds or HTTP date) asks us to wait; undefined without one. */
function retryAfterMs(headers: Headers): number | undefined {
  const retryAfter = headers.get("retry-after");
  if (retryAfter === null || retryAfter.trim() === "") return undefined;
  const secs = Number(retryAfter);
  if (Number.isFinite(secs)) return Math.max(0, secs * 1000);
  const at = Date.parse(retryAfter);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}

/** Milliseconds a 429 asks us to wait: Retry-After, else RateLimit-Reset (unix seconds: the end of the rate limit's window). */
export function serverWaitMs(headers: Headers): number | undefined {
  const asked = retryAfterMs(headers);
  if (asked !== undefined) return asked;
  const reset = Number(headers.get("ratelimit-reset") ?? NaN);
  if (Number.isFinite(reset) && reset > 0) return Math.max(0, reset * 1000 - Date.now());
  return undefined;
}

function abortError(signal: AbortSignal): UserAbortError {
  return new UserAbortError({ code: "aborted", message: "The request was aborted.", cause: signal.reason });
}

/**
 * Resolves once the wall clock reaches `deadline` (checked at least every second, so a suspended
 * machine or a clock that jumps does not make it oversleep a rate-limit reset); rejects on abort.
 */
export async function sleepUntil(deadline: number, signal?: AbortSignal): Promise<void> {
  for (;;) {
    if (signal?.aborted) throw abortError(signal);
    const left = deadline - Date.now();
    if (left <= 0) return;
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", done);
        resolve();
      };
      const timer = setTimeout(done, Math.min(left, 1000));
      signal?.addEventListener("abort", done, { once: true });
    });
  }
}

function newIdempotencyKey(): string {
  const c = (globalThis as { crypto?: { randomUUID?: () => string } }).crypto;
  if (c?.randomUUID) return `sdk_${c.randomUUID()}`;
  return `sdk_${Date.now().toString(36)}_${Math.random().toString(36).slice(2)}${Math.random().toString(36).slice(2)}`;
}

/** A 503 processor_not_configured is the server's set-up, not a passing failure: asking again only spends the rate budget. */
function isRetryableStatus(status: number, code: string | undefined): boolean {
  return status === 429 || (status >= 500 && code !== "processor_not_configured") || (status === 409 && code === "idempotency_key_in_use");
}

/** The HTTP layer: auth, JSON, Idempotency-Keys, timeouts, retries and error mapping. */
export class HttpClient {
  readonly baseUrl: string;
  readonly timeoutMs: number;
  readonly maxRetries: number;
  readonly maxRetryWaitMs: number;
  readonly #apiKey: string;
  readonly #fetch: Fetch;

  constructor(options: ClientOptions = {}) {
    const apiKey = options.apiKey ?? env("CARDCTL_API_KEY");
    if (!apiKey) throw new CardctlError({ code: "missing_api_key", message: "No API key: pass { apiKey } or set CARDCTL_API_KEY." });
    this.#apiKey = apiKey;
    this.baseUrl = (options.baseUrl ?? env("CARDCTL_BASE_URL") ?? "http://127.0.0.1:4000").replace(/\/+$/, "").replace(/\/v1$/, "");
    this.timeoutMs = options.timeoutMs ?? 60_000;
    this.maxRetries = options.maxRetries ?? 3;
    this.maxRetryWaitMs = options.maxRetryWaitMs ?? 60_000;
    const f = options.fetch ?? (globalThis.fetch as Fetch | undefined);
    if (!f) throw new CardctlError({ code: "missing_fetch", message: "No global fetch here: pass { fetch }." });
    this.#fetch = options.fetch ? f : (input, init) => globalThis.fetch(input, init);
  }

  /** Sends one logical request (with its retries) and returns the parsed JSON body. */
  async request<T>(spec: RequestSpec<T>): Promise<T> {
    const o = spec.options ?? {};
    const timeoutMs = o.timeoutMs ?? this.timeoutMs;
    const maxRetries = Math.max(0, o.maxRetries ?? this.maxRetries);

    let url = `${this.baseUrl}/v1${spec.path}`;
    if (spec.query) {
      const qs = new URLSearchParams();
      for (const [k, v] of Object.entries(spec.query)) if (v !== undefined && v !== null) qs.set(k, String(v));
      const s = qs.toString();
      if (s) url += `?${s}`;
    }
    const headers: Record<string, string> = { authorization: `Bearer ${this.#apiKey}`, accept: "application/json" };
    let payload: string | undefined;
    if (spec.body !== undefined) {
      payload = JSON.stringify(spec.body);
      headers["content-type"] = "application/json";
    }
    const idempotencyKey = spec.method === "POST" ? (o.idempotencyKey ?? newIdempotencyKey()) : undefined;
    if (idempotencyKey) headers["idempotency-key"] = idempotencyKey;
    try {
      return await this.#attempts(spec, url, headers, payload, maxRetries, timeoutMs);
    } catch (err) {
      // Whether the work was done may be unknown (a timeout, a 5xx): the same key asks again safely.
      if (idempotencyKey && err instanceof CardctlError) err.idempotencyKey = idempotencyKey;
      throw err;
    }
  }

  async #attempts<T>(spec: RequestSpec<T>, url: string, headers: Record<string, string>, payload: string | undefined, maxRetries: number, timeoutMs: number): Promise<T> {
    const signal = spec.options?.signal;
    /** Whether an earlier attempt may have done the work without our hearing back. */
    let unheard = false;
    /** When the server first said a request under this key was still running. */
    let inUseSince: number | undefined;
    for (let attempt = 0; ; attempt++) {
      if (signal?.aborted) throw abortError(signal);
      const canRetry = attempt < maxRetries;

      let res: Response;
      let body: unknown;
      try {
        ({ res, body } = await fetchOnce(this.#fetch, url, { method: spec.method, headers, body: payload }, {
          signal,
          timeoutMs,
          // The path as the server has it (/v1/cards): the message names the request's whole URL.
          request: `${spec.method} /v1${spec.path}`,
          where: this.baseUrl,
        }));
      } catch (err) {
        // Unreachable or too slow: retried (TimeoutError is an APIConnectionError); an abort is not.
        if (!canRetry || !(err instanceof APIConnectionError)) throw err;
        unheard = true;
        await sleepUntil(Date.now() + backoffMs(attempt), signal);
        continue;
      }
      if (res.ok) return body as T;
      if (res.status === 404 && unheard && spec.goneAfterRetry) return spec.goneAfterRetry();

      const waitMs = res.status === 429 ? serverWaitMs(res.headers) : undefined;
      const error = errorFromResponse(res.status, body, res.headers, { retryAfterMs: waitMs });
      // The first request under this key is still at work (a card's creation may take its lease,
      // 60 s by default): asked again until maxRetryWaitMs has passed, not maxRetries times.
      const inUse = res.status === 409 && error.code === "idempotency_key_in_use";
      if (inUse) inUseSince ??= Date.now();
      const retry = inUse ? maxRetries > 0 && Date.now() - inUseSince! < this.maxRetryWaitMs : canRetry && isRetryableStatus(res.status, error.code);
      if (!retry) throw error;
      if (res.status >= 500) unheard = true;
      let delay = backoffMs(attempt);
      if (res.status === 429 && waitMs !== undefined) {
        if (waitMs > this.maxRetryWaitMs) throw error;
        delay = waitMs + Math.random() * 250;
      } else if (res.status === 503) {
        // Only a Retry-After: RateLimit-Reset, on every answer, is the rate limit's window, no hint about a 503.
        const asked = retryAfterMs(res.headers);
        if (asked !== undefined && asked <= this.maxRetryWaitMs) delay = Math.max(delay, asked);
      }
      await sleepUntil(Date.now() + delay, signal);
    }
  }

  /**
   * Opens a long-lived GET (a Server-Sent Events stream) with the API key: one attempt, no time
   * limit once the answer has started. Resolves to the response while its body is still arriving;
   * a non-2xx answer throws the matching {@link CardctlError}, a network failure an APIConnectionError.
   * @internal
   */
  async openStream(path: string, query: Record<string, string | undefined>, headers: Record<string, string>, signal: AbortSignal): Promise<Response> {
    const qs = new URLSearchParams(Object.entries(query).filter((e): e is [string, string] => e[1] !== undefined)).toString();
    const url = `${this.baseUrl}/v1${path}${qs ? `?${qs}` : ""}`;
    let res: Response;
    try {
      res = await this.#fetch(url, { method: "GET", headers: { authorization: `Bearer ${this.#apiKey}`, accept: "text/event-stream", ...headers }, signal });
    } catch (err) {
      if (signal.aborted) throw abortError(signal);
      throw new APIConnectionError({ code: "connection_error", message: `Could not reach ${this.baseUrl} (GET /v1${path}): ${describe(err)}`, cause: err });
    }
    if (res.ok) return res;
    const text = await res.text().catch(() => "");
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      // not JSON: the text is the body
    }
    throw errorFromResponse(res.status, body, res.headers, { retryAfterMs: res.status === 429 ? serverWaitMs(res.headers) : undefined });
  }

  /**
   * One GET to a card processor's own API (not this service's): `url` is absolute, or a path on
   * this service (the simulated processor). Authorised by `headers` only (an ephemeral key), never
   * by the API key. One attempt, with the client's time limit; a non-2xx answer (Stripe's error
   * shape, `{error: {type, code?, message}}`) throws the matching {@link CardctlError}.
   * @internal
   */
  async getFromProcessor(url: string, headers: Record<string, string>, options: RequestOptions = {}): Promise<unknown> {
    const target = /^https?:\/\//i.test(url) ? url : `${this.baseUrl}${url.startsWith("/") ? "" : "/"}${url}`;
    const signal = options.signal;
    if (signal?.aborted) throw abortError(signal);
    const { res, body } = await fetchOnce(this.#fetch, target, { method: "GET", headers: { accept: "application/json", ...headers } }, {
      signal,
      timeoutMs: options.timeoutMs ?? this.timeoutMs,
      request: `GET ${target.split("?")[0]}`,
      where: "the card processor",
    });
    if (res.ok) return body;
    const e = (body as { error?: { type?: unknown; code?: unknown; message?: unknown } } | null)?.error;
    const code = typeof e?.code === "string" ? e.code : typeof e?.type === "string" ? e.type : undefined;
    const message = typeof e?.message === "string" ? `The card processor refused the reveal: ${e.message}` : undefined;
    throw errorFromResponse(res.status, { error: { code, message } }, res.headers);
  }
}

/**
 * One fetch under the caller's signal and a time limit, its body parsed as JSON (else the text).
 * Throws the caller's abort, a TimeoutError, or an APIConnectionError saying `where` could not be
 * reached for `request` ("GET /v1/cards").
 */
async function fetchOnce(
  doFetch: Fetch,
  url: string,
  init: Omit<RequestInit, "signal">,
  o: { signal?: AbortSignal; timeoutMs: number; request: string; where: string },
): Promise<{ res: Response; body: unknown }> {
  const controller = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort();
  }, o.timeoutMs);
  const onAbort = () => controller.abort();
  o.signal?.addEventListener("abort", onAbort, { once: true });
  let res: Response;
  let text: string;
  try {
    res = await doFetch(url, { ...init, signal: controller.signal });
    text = await res.text();
  } catch (err) {
    if (o.signal?.aborted) throw abortError(o.signal);
    if (timedOut) throw new TimeoutError({ code: "timeout", message: `${o.request} timed out after ${o.timeoutMs} ms.`, cause: err });
    throw new APIConnectionError({ code: "connection_error", message: `Could not reach ${o.where} (${o.request}): ${describe(err)}`, cause: err });
  } finally {
    clearTimeout(timer);
    o.signal?.removeEventListener("abort", onAbort);
  }
  let body: unknown = undefined;
  if (text) {
    try {
      body = JSON.parse(text);
    } catch {
      body = text;
    }
  }
  return { res, body };
}

function describe(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const cause = (err as { cause?: { code?: string; message?: string } }).cause;
  return cause?.code ? `${err.message} (${cause.code})` : cause?.message ? `${err.message} (${cause.message})` : err.message;
}
