import { createHash } from "node:crypto";
import { PassThrough } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AuthenticationError, Cardctl, type Fetch } from "../../../packages/sdk/src/index.js";
import { luhnValid } from "./fake-stripe.js";
import { dbKind, processor, startServer, type TestServer } from "./harness.js";
import { guarded, trpc } from "./helpers.js";

/**
 * Issue 15: a card's number and CVC come from the processor, never from us. The SDK's cards.reveal
 * reads the card with its ephemeral key, straight from the processor: the simulated processor's
 * client endpoint on the server, or Stripe's issuing card API (here the fake) as Issuing Elements
 * calls it. Keys open only their own card, and only until they expire; the number never appears in
 * the server's logs nor in any /v1 or /trpc response.
 */
describe(`revealing a card through the processor (${processor}, ${dbKind})`, () => {
  let s: TestServer;
  let logs = "";
  /** Every /v1 and /trpc response body of this server, as the SDK and the tests received them. */
  const apiBodies: string[] = [];
  let sdk: Cardctl;

  /** fetch for the SDK that keeps a copy of the server's /v1 and /trpc response bodies. */
  const recordingFetch =
    (rewrite?: (url: string, init: RequestInit) => RequestInit): Fetch =>
    async (url, init) => {
      const res = await fetch(url, rewrite ? rewrite(url, init) : init);
      if (url.startsWith(`${s.url}/v1/`) || url.startsWith(`${s.url}/trpc/`)) apiBodies.push(await res.clone().text());
      return res;
    };

  beforeAll(async () => {
    const stream = new PassThrough();
    stream.on("data", (d) => (logs += d.toString()));
    s = guarded(await startServer({ LOG_LEVEL: "trace" }, { logStream: stream }));
    sdk = new Cardctl({ apiKey: s.apiKey, baseUrl: s.url, fetch: recordingFetch(), maxRetries: 0 });
  });
  afterAll(() => s.close());

  const newCard = async (amount = 1500) => {
    const r = await s.request("POST", "/v1/cards", { body: { amount_cents: amount, agent_id: "reveal-test", purpose: "reveal" } });
    expect(r.status).toBe(201);
    apiBodies.push(JSON.stringify(r.body));
    return r.body as { id: string; last_four: string; expiration: string };
  };
  const getCard = async (id: string) => {
    const r = await s.request("GET", `/v1/cards/${id}`);
    expect(r.status).toBe(200);
    apiBodies.push(JSON.stringify(r.body));
    return r.body as { processor_card_id: string; ephemeral_key_secret: string; reveal: { url: string; api_version: string | null } };
  };
  /** The processor's card read as Issuing Elements does it, with a given ephemeral key. */
  const readWithKey = (card: { reveal: { url: string; api_version: string | null } }, secret: string) =>
    fetch(`${card.reveal.url.startsWith("/") ? s.url : ""}${card.reveal.url}?expand[]=number&expand[]=cvc`, {
      headers: { authorization: `Bearer ${secret}`, ...(card.reveal.api_version ? { "stripe-version": card.reveal.api_version } : {}) },
    });
  /** The processor's own record of the number, to compare with. */
  const numberAtProcessor = async (processorCardId: string) =>
    s.fake ? s.fake.cardSecrets.get(processorCardId)!.number : String((await s.query("SELECT number FROM sim_cards WHERE id = ?", [processorCardId]))[0].number);
  const expireKey = async (secret: string) => {
    if (s.fake) return s.fake.expireEphemeralKey(secret);
    const hash = createHash("sha256").update(secret).digest("hex");
    await s.query("UPDATE sim_ephemeral_keys SET expires_at = ? WHERE secret_hash = ?", [Date.now() - 1000, hash]);
  };
  const expectStripeError = async (res: Response, status: number) => {
    expect(res.status).toBe(status);
    const body = await res.json();
    // Stripe's error shape, not the cardctl envelope.
    expect(Object.keys(body)).toEqual(["error"]);
    expect(body.error).toMatchObject({ type: "invalid_request_error", message: expect.any(String) });
    expect(body.error).not.toHaveProperty("request_id");
    expect(JSON.stringify(body)).not.toMatch(/\d{12,19}/);
  };

  it("GET /v1/cards/:id says where to reveal: the processor's card endpoint and API version", async () => {
    const card = await newCard();
    const got = await getCard(card.id);
    if (s.onStripe) expect(got.reveal).toEqual({ url: `${s.fake!.url}/v1/issuing/cards/${got.processor_card_id}`, api_version: "2020-03-02" });
    else expect(got.reveal).toEqual({ url: `/simulated-processor/v1/issuing/cards/${got.processor_card_id}`, api_version: null });
    expect(got.ephemeral_key_secret).toMatch(/^ek_test_/);
  });

  it("SDK cards.reveal returns a Luhn-valid number whose last four match the card, with CVC and expiry", async () => {
    const card = await newCard();
    const revealed = await sdk.cards.reveal(card.id);
    expect(Object.keys(revealed).sort()).toEqual(["cvc", "exp_month", "exp_year", "last_four", "number"]);
    expect(revealed.number).toMatch(/^\d{16}$/);
    expect(luhnValid(revealed.number)).toBe(true);
    expect(revealed.last_four).toBe(card.last_four);
    expect(revealed.number.endsWith(card.last_four)).toBe(true);
    expect(revealed.cvc).toMatch(/^\d{3}$/);
    const [mm, yy] = card.expiration.split("/");
    expect(revealed.exp_month).toBe(Number(mm));
    expect(revealed.exp_year % 100).toBe(Number(yy));
    const got = await getCard(card.id);
    expect(revealed.number).toBe(await numberAtProcessor(got.processor_card_id));
    if (s.fake) {
      const read = s.fake.calls(`/v1/issuing/cards/${got.processor_card_id}`, "GET").at(-1)!;
      expect(read.route).toBe("issuing.cards.retrieve_with_ephemeral_key");
      expect(read.stripeVersion).toBe("2020-03-02");
    }
  });

  it("a key opens its own card only: another card's key → 401 in Stripe's error shape", async () => {
    const a = await getCard((await newCard()).id);
    const b = await getCard((await newCard()).id);
    await expectStripeError(await readWithKey(a, b.ephemeral_key_secret), 401);
    // Its own key works.
    const ok = await readWithKey(a, a.ephemeral_key_secret);
    expect(ok.status).toBe(200);
    expect((await ok.json()).number).toBe(await numberAtProcessor(a.processor_card_id));
  });

  it("an expired, unknown or missing key → 401", async () => {
    const { id } = await newCard();
    const card = await getCard(id);
    await expireKey(card.ephemeral_key_secret);
    await expectStripeError(await readWithKey(card, card.ephemeral_key_secret), 401);
    await expectStripeError(await readWithKey(card, "ek_test_" + "x".repeat(40)), 401);
    // A fresh read makes a fresh key that works.
    const again = await getCard(id);
    expect((await readWithKey(again, again.ephemeral_key_secret)).status).toBe(200);
    if (!s.onStripe) {
      const none = await fetch(`${s.url}${card.reveal.url}`);
      await expectStripeError(none, 401);
      // Our API key is no ephemeral key.
      await expectStripeError(await readWithKey(card, s.apiKey), 401);
    }
  });

  it("the SDK throws AuthenticationError when the processor refuses the key", async () => {
    const other = await getCard((await newCard()).id);
    const card = await newCard();
    const client = new Cardctl({
      apiKey: s.apiKey,
      baseUrl: s.url,
      maxRetries: 0,
      fetch: recordingFetch((url, init) =>
        /issuing\/cards/.test(url) ? { ...init, headers: { ...(init.headers as Record<string, string>), authorization: `Bearer ${other.ephemeral_key_secret}` } } : init,
      ),
    });
    const err = await client.cards.reveal(card.id).catch((e) => e);
    expect(err).toBeInstanceOf(AuthenticationError);
    expect(err.status).toBe(401);
    expect(String(err.message)).not.toContain(other.ephemeral_key_secret);
  });

  it.skipIf(processor === "stripe")("the simulated processor's endpoint is outside /v1: no rate limit, no cardctl envelope", async () => {
    const card = await getCard((await newCard()).id);
    const res = await readWithKey(card, card.ephemeral_key_secret);
    expect(res.status).toBe(200);
    expect(res.headers.get("ratelimit-limit")).toBeNull();
    expect(res.headers.get("cache-control")).toBe("no-store");
    const body = await res.json();
    expect(body).toMatchObject({ id: card.processor_card_id, object: "issuing.card", last4: expect.any(String) });
  });

  it("the number never appears in the server's logs nor in any /v1 or /trpc response of a reveal", async () => {
    const card = await newCard();
    const revealed = await sdk.cards.reveal(card.id);
    // Both transports' card reads, and lists.
    const viaTrpc = await trpc(s).query("cards.get", { id: card.id });
    expect(viaTrpc.status).toBe(200);
    apiBodies.push(JSON.stringify(viaTrpc.body));
    apiBodies.push(JSON.stringify((await s.request("GET", "/v1/cards")).body));
    await sdk.cards.list();
    const secretKeys = [...apiBodies.join("\n").matchAll(/ek_test_[A-Za-z0-9_-]+/g)].map((m) => m[0]);
    expect(secretKeys.length).toBeGreaterThan(0);
    expect(apiBodies.length).toBeGreaterThan(5);
    for (const body of apiBodies) {
      expect(body).not.toContain(revealed.number);
      expect(body).not.toMatch(new RegExp(`"cvc"|"number"`));
    }
    // Logged at trace level: every request line, and nothing secret in them.
    expect(logs).toContain(s.onStripe ? `/v1/cards/${card.id}` : "/simulated-processor/v1/issuing/cards/");
    expect(logs).not.toContain(revealed.number);
    for (const k of secretKeys) expect(logs).not.toContain(k);
    expect(logs).not.toMatch(/ek_(test|live)_/);
  });
});
