import fc from "fast-check";
import { PassThrough } from "node:stream";
import Stripe from "stripe";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dbKind, expectError, startServer, type TestServer } from "./harness.js";
import { rawHttp } from "./raw-http.js";

const SECRET = "whsec_fuzz_0123456789";

/**
 * Fuzzing what the earlier fuzzer found 500s with: deeply nested JSON on every transport, odd Host
 * headers, and Stripe events with a valid signature but any shape. Each answer is below 500, in
 * the error envelope with its Request-Id, and nothing unexpected is logged.
 */
describe(`fuzz: nesting, Host headers, signed webhook events (${dbKind})`, () => {
  let s: TestServer;
  let logs = "";
  beforeAll(async () => {
    const stream = new PassThrough();
    stream.on("data", (d) => (logs += d.toString()));
    s = await startServer({ RATE_LIMIT_PER_HOUR: "1000000", STRIPE_WEBHOOK_SECRET: SECRET, LOG_LEVEL: "error" }, { logStream: stream });
  });
  afterAll(() => s.close());

  const paths = ["/v1/cards", "/v1/cards/card_x/close", "/v1/approvals/appr_x/reject", "/trpc/cards.create", "/trpc/x", "/trpc/no.such.thing", "/admin/v1/accounts"];

  /** JSON nested `depth` deep, built from random openers, with optional valid content inside. */
  const nested = fc
    .record({
      depth: fc.integer({ min: 1, max: 20_000 }),
      openers: fc.array(fc.constantFrom("[", '{"a":', '{"amount_cents":', "[1,"), { minLength: 1, maxLength: 4 }),
      inner: fc.constantFrom("1", '"x"', "null", "{}", "[]"),
      unclosed: fc.boolean(),
    })
    .map(({ depth, openers, inner, unclosed }) => {
      const open: string[] = [];
      for (let i = 0; i < depth; i++) open.push(openers[i % openers.length]!);
      const close = unclosed ? "" : open.map((o) => (o.startsWith("[") ? "]" : "}")).reverse().join("");
      return open.join("") + inner + close;
    });

  // Depth 1 with valid content is a real request (`{"amount_cents":1}` creates a card): any status
  // below 500 stands, and every error is the envelope.
  it("answers nested bodies of any depth below 500, every error in the envelope", async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...paths), nested, fc.boolean(), async (path, rawBody, withKey) => {
        const r = await s.request("POST", path, {
          rawBody,
          headers: { "content-type": "application/json", ...(withKey ? { "idempotency-key": `fuzz-${Math.random()}` } : {}) },
        });
        expect(r.status, `${path} ${rawBody.slice(0, 60)}… (${rawBody.length} chars)`).toBeLessThan(500);
        if (r.status >= 400) expectError(r, r.status, r.body.error.code);
      }),
      { numRuns: 150 },
    );
  });

  it("answers any Host header on /trpc and /v1 as the same status, never 500", async () => {
    const host = fc.oneof(fc.string({ maxLength: 30 }), fc.constantFrom("a b", "%00", "[::1", "x:y:z", "é", "a/b", "a?b", "a#b", "..", "[]"));
    await fc.assert(
      fc.asyncProperty(host, async (h) => {
        const clean = h.replace(/[\r\n\0]/g, "");
        const get = (path: string) => rawHttp(s.url, [`GET ${path} HTTP/1.1\r\nHost: ${clean}\r\nAuthorization: Bearer ${s.apiKey}\r\nConnection: close\r\n\r\n`]);
        const [trpc, rest] = [await get("/trpc/balance.retrieve"), await get("/v1/balance")];
        expect(trpc.status, `Host '${clean}'`).toBe(rest.status);
        expect(trpc.status).toBeGreaterThan(0);
        expect(trpc.status).toBeLessThan(500);
        if (trpc.status >= 400) expect(trpc.body.error.request_id).toBe(trpc.headers["request-id"]);
      }),
      { numRuns: 100 },
    );
  });

  it("answers signed Stripe events of any shape with 200 or a 400 envelope, never 500", async () => {
    const anyString = fc.oneof(fc.string({ maxLength: 40 }), fc.string({ minLength: 250, maxLength: 400 }), fc.constantFrom("2024-06-20\n", "evt_\u0000", "a\r\nb"));
    const anyValue = fc.oneof(anyString, fc.integer(), fc.double(), fc.boolean(), fc.constant(null), fc.anything({ maxDepth: 2 }));
    const objectLike = fc.record(
      {
        id: anyValue,
        object: fc.constantFrom("issuing.authorization", "issuing.transaction", "x"),
        amount: anyValue,
        approved: anyValue,
        type: anyValue,
        card: fc.oneof(anyValue, fc.record({ id: anyValue, metadata: fc.oneof(fc.dictionary(fc.string({ maxLength: 60 }), anyValue), anyValue) })),
        pending_request: fc.oneof(fc.constant(null), fc.record({ amount: anyValue }), anyValue),
      },
      { requiredKeys: [] },
    );
    const envelope = fc.record(
      {
        id: fc.oneof(fc.constant("evt_fuzz").map((p) => `${p}${Math.random().toString(36).slice(2)}`), anyValue),
        object: fc.constant("event"),
        type: fc.oneof(fc.constantFrom("issuing_authorization.request", "issuing_authorization.created", "issuing_transaction.created", "payment_intent.canceled"), anyValue),
        livemode: fc.oneof(fc.boolean(), anyValue),
        api_version: fc.oneof(fc.constant(Stripe.API_VERSION), anyValue),
        created: fc.oneof(fc.integer({ min: 0 }), anyValue),
        data: fc.oneof(fc.record({ object: fc.oneof(objectLike, anyValue) }), anyValue),
      },
      { requiredKeys: [] },
    );
    const payload = fc.oneof(envelope.map((e) => JSON.stringify(e)), fc.json({ maxDepth: 3 }), nested);
    await fc.assert(
      fc.asyncProperty(payload, async (body) => {
        const signature = Stripe.webhooks.generateTestHeaderString({ payload: body, secret: SECRET });
        const r = await s.request("POST", "/v1/webhooks/stripe", { rawBody: body, key: null, headers: { "content-type": "application/json", "stripe-signature": signature } });
        expect(r.status, body.slice(0, 200)).toBeLessThan(500);
        if (r.status >= 400) expectError(r, r.status, r.body.error.code);
        r.headers.forEach((value, name) => expect(value, name).not.toMatch(/[\r\n\0]/));
      }),
      { numRuns: 300 },
    );
    expect(logs).not.toMatch(/"level":(50|60)/); // nothing logged as an error
  });
});
