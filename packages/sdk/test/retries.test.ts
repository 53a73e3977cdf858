import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { Cardctl, DecisionTimeoutError, NotFoundError, ProcessorError, RateLimitError, TimeoutError, type Fetch } from "../src/index.js";
import { clientFor, recordingFetch, startServer, tcpProxy, type TestServer } from "./helpers.js";

describe("retries against the real server", () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startServer({ PROCESSOR_TIMEOUT_MS: "1500" });
  });
  afterAll(() => s?.close());
  afterEach(() => {
    s.app.simulated.setFault("hold", null);
    s.app.simulated.setFault("mint", null);
  });

  const freshKey = async () => (await s.newAccount()).key();

  it("a create whose first response is lost on the wire is retried with the same Idempotency-Key: exactly one card", async () => {
    const apiKey = await freshKey();
    const proxy = await tcpProxy(s.url, (n) => (n === 1 ? "drop-response" : "pass"));
    try {
      const c = new Cardctl({ apiKey, baseUrl: proxy.url, maxRetries: 2 });
      const card = await c.cards.create({ amount_cents: 4200, agent_id: "dropper" });
      if (card.status === "PENDING_APPROVAL") throw new Error("expected a card");

      const keys = proxy.idempotencyKeys();
      expect(keys).toHaveLength(2);
      expect(keys[0]).toBe(keys[1]);
      // The server did the work the first time; the retry got the stored response.
      const direct = clientFor(s, { apiKey });
      const cards = (await direct.cards.list()).data;
      expect(cards.map((x) => x.id)).toEqual([card.id]);
      expect((await direct.balance.retrieve()).held_cents).toBe(4200);
    } finally {
      await proxy.close();
    }
  });

  it("times out a request that gets no answer, retries it with the same key, then throws TimeoutError", async () => {
    const proxy = await tcpProxy(s.url, () => "blackhole");
    try {
      const c = new Cardctl({ apiKey: s.apiKey, baseUrl: proxy.url, timeoutMs: 200, maxRetries: 1 });
      const err = await c.cards.create({ amount_cents: 100 }).catch((e) => e);
      expect(err).toBeInstanceOf(TimeoutError);
      expect(err.code).toBe("timeout");
      expect(err.message).toBe("POST /v1/cards timed out after 200 ms.");
      const keys = proxy.idempotencyKeys();
      expect(keys).toHaveLength(2);
      expect(keys[0]).toBe(keys[1]);
    } finally {
      await proxy.close();
    }
  });

  it("retries a 5xx (502 processor_error) and then succeeds", async () => {
    const apiKey = await freshKey();
    s.app.simulated.setFault("mint", "fail");
    const { fetch, log } = recordingFetch((x) => {
      if (x.status === 502) s.app.simulated.setFault("mint", null);
    });
    const c = clientFor(s, { apiKey, fetch });
    const card = await c.cards.create({ amount_cents: 500 });
    expect(card.status).toBe("OPEN");
    expect(log.map((x) => x.status)).toEqual([502, 201]);
    expect(log[0]!.idempotencyKey).toBe(log[1]!.idempotencyKey);
    expect((await c.cards.list()).data).toHaveLength(1);
  });

  it("never retries 503 processor_not_configured (a live key on a server without Stripe): one request, ProcessorError", async () => {
    const apiKey = await (await s.newAccount()).key("live");
    const { fetch, log } = recordingFetch();
    const err = await clientFor(s, { apiKey, fetch }).cards.create({ amount_cents: 500 }).catch((e) => e);
    expect(err).toBeInstanceOf(ProcessorError);
    expect(err).toMatchObject({ status: 503, code: "processor_not_configured" });
    expect(log.map((x) => x.status)).toEqual([503]);
  });

  it("retries 409 idempotency_key_in_use while the first attempt is still running", async () => {
    const apiKey = await freshKey();
    s.app.simulated.setFault("hold", "hang"); // the processor times out after 1.5 s
    const { fetch, log } = recordingFetch((x) => {
      if (x.status === "error") s.app.simulated.setFault("hold", null);
    });
    const c = clientFor(s, { apiKey, fetch, timeoutMs: 300, maxRetries: 8 });
    const card = await c.cards.create({ amount_cents: 600 });
    expect(card.status).toBe("OPEN");
    const statuses = log.map((x) => x.status);
    expect(statuses[0]).toBe("error"); // our timeout
    expect(log.some((x) => x.code === "idempotency_key_in_use")).toBe(true);
    expect(statuses.at(-1)).toBe(201);
    expect(new Set(log.map((x) => x.idempotencyKey)).size).toBe(1);
    expect((await c.cards.list()).data).toHaveLength(1);
  });
});

describe("a POST whose outcome is unknown", () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startServer({ PROCESSOR_TIMEOUT_MS: "1500" });
  });
  afterAll(() => s?.close());
  afterEach(() => s.app.simulated.setFault("hold", null));

  it("fails with the Idempotency-Key it was sent under: the same call again with it gets the first answer, one card", async () => {
    const apiKey = await (await s.newAccount()).key();
    const proxy = await tcpProxy(s.url, (n) => (n === 1 ? "drop-response" : "pass"));
    try {
      const err = await new Cardctl({ apiKey, baseUrl: proxy.url, maxRetries: 0 }).cards.create({ amount_cents: 700 }).catch((e) => e);
      expect(err.code).toBe("connection_error");
      expect(err.idempotencyKey).toBe(proxy.idempotencyKeys()[0]);
      const direct = clientFor(s, { apiKey });
      const card = await direct.cards.create({ amount_cents: 700 }, { idempotencyKey: err.idempotencyKey });
      expect((await direct.cards.list()).data.map((x) => x.id)).toEqual([card.status === "OPEN" ? card.id : "a card"]);
    } finally {
      await proxy.close();
    }
  });

  it("409 idempotency_key_in_use is asked again while the first request runs, for up to maxRetryWaitMs rather than maxRetries times", async () => {
    const apiKey = await (await s.newAccount()).key();
    s.app.simulated.setFault("hold", "hang"); // the first request's hold call hangs, up to the 1.5 s processor timeout
    const { fetch, log } = recordingFetch((x) => {
      if (x.status === "error") s.app.simulated.setFault("hold", null);
    });
    const c = clientFor(s, { apiKey, fetch, timeoutMs: 200, maxRetries: 1 });
    const card = await c.cards.create({ amount_cents: 800 });
    // Refused while the first ran; once its hold call timed out (and its key was freed), the next made the card.
    expect(card.status).toBe("OPEN");
    const statuses = log.map((x) => x.status);
    expect(statuses[0]).toBe("error");
    expect(statuses.filter((x) => x === 409).length).toBeGreaterThan(1);
    expect(statuses.at(-1)).toBe(201);
    expect(new Set(log.map((x) => x.idempotencyKey)).size).toBe(1);
  });
});

describe("a DELETE whose answer was lost", () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startServer();
  });
  afterAll(() => s?.close());

  it("resolves as deleted when its retry finds the endpoint gone; an unknown id is still NotFoundError", async () => {
    const apiKey = await (await s.newAccount()).key();
    const made = await clientFor(s, { apiKey }).webhookEndpoints.create({ url: "https://93.184.215.14/hook", events: ["*"] });
    let deletes = 0;
    // The first DELETE reaches the server and deletes; its answer is lost on the way back.
    const losing: Fetch = async (input, init) => {
      const res = await fetch(input, init);
      if (init?.method === "DELETE" && deletes++ === 0) throw new TypeError("fetch failed");
      return res;
    };
    const c = clientFor(s, { apiKey, fetch: losing });
    expect(await c.webhookEndpoints.del(made.id)).toEqual({ id: made.id, deleted: true });
    expect(deletes).toBe(2);
    await expect(clientFor(s, { apiKey }).webhookEndpoints.del(made.id)).rejects.toBeInstanceOf(NotFoundError);
  });
});

describe("rate limits against the real server (5 per hour)", () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startServer({ RATE_LIMIT_PER_HOUR: "5" });
  });
  afterAll(() => s?.close());
  afterEach(() => void vi.useRealTimers());

  it("a 429 that asks for more than maxRetryWaitMs throws RateLimitError at once", async () => {
    const apiKey = await (await s.newAccount()).key();
    for (let i = 0; i < 5; i++) expect((await s.request("GET", "/v1/balance", { key: apiKey })).status).toBe(200);
    const { fetch, log } = recordingFetch();
    const c = clientFor(s, { apiKey, fetch });
    const t0 = Date.now();
    const err = await c.balance.retrieve().catch((e) => e);
    expect(err).toBeInstanceOf(RateLimitError);
    expect(err).toMatchObject({ status: 429, code: "rate_limited" });
    expect(err.retryAfterMs).toBeGreaterThan(3500_000);
    expect(err.resetAt.getTime()).toBeGreaterThan(Date.now() + 3500_000);
    expect(log).toHaveLength(1);
    expect(Date.now() - t0).toBeLessThan(1000);
  });

  it("waitForDecision rate limited: no poll before the window resets (one request, then the timeout)", async () => {
    const apiKey = await (await s.newAccount()).key();
    const owner = clientFor(s, { apiKey });
    await owner.policies.updateDefault({ approval_required: true });
    const created = await owner.cards.create({ amount_cents: 500 });
    if (created.status !== "PENDING_APPROVAL") throw new Error("expected a pending approval");
    for (let i = 0; i < 3; i++) expect((await s.request("GET", "/v1/balance", { key: apiKey })).status).toBe(200);
    const { fetch, log } = recordingFetch();
    const c = clientFor(s, { apiKey, fetch });
    const err = await c.approvals.waitForDecision(created.approval_id, { timeoutMs: 1500, pollIntervalMs: 50 }).catch((e) => e);
    expect(err).toBeInstanceOf(DecisionTimeoutError);
    expect(log.map((x) => x.status)).toEqual([429]);
  });

  it("events.stream rate limited: reconnects when the window resets, not on its short backoff", async () => {
    const apiKey = await (await s.newAccount()).key();
    for (let i = 0; i < 5; i++) expect((await s.request("GET", "/v1/balance", { key: apiKey })).status).toBe(200);
    const abort = new AbortController();
    const waits: number[] = [];
    const stream = clientFor(s, { apiKey }).events.stream({
      signal: abort.signal,
      onDisconnect: (err, retryInMs) => {
        expect(err).toBeInstanceOf(RateLimitError);
        waits.push(retryInMs);
        abort.abort();
      },
    });
    for await (const _ of stream) throw new Error("no event expected");
    expect(waits).toHaveLength(1);
    expect(waits[0]).toBeGreaterThan(3500_000);
  });

  it("waits out a 429 until the window resets (Retry-After / RateLimit-Reset), then succeeds", async () => {
    const apiKey = await (await s.newAccount()).key();
    // The window is an hour: spend the budget "an hour ago, minus 2.5 s" (a faked Date, which the
    // in-process server's limiter also reads), so the real reset comes 2.5 s after the clock is
    // back to real time.
    const realNow = Date.now();
    vi.useFakeTimers({ toFake: ["Date"], now: realNow - 3600_000 + 2500 });
    for (let i = 0; i < 5; i++) expect((await s.request("GET", "/v1/balance", { key: apiKey })).status).toBe(200);
    const { fetch, log } = recordingFetch();
    const c = clientFor(s, { apiKey, fetch, maxRetryWaitMs: 2 * 3600_000 });
    const pending = c.balance.retrieve();
    await vi.waitFor(() => expect(log[0]?.status).toBe(429), { timeout: 5000, interval: 5 });
    vi.useRealTimers();
    const t0 = Date.now();
    const balance = await pending;
    expect(balance.held_cents).toBe(0);
    expect(log.map((x) => x.status)).toEqual([429, 200]);
    // It waited for the reset (~2.5 s from realNow) instead of retrying early.
    expect(Date.now()).toBeGreaterThanOrEqual(realNow + 2500);
    expect(Date.now() - t0).toBeLessThan(6000);
  });
});
