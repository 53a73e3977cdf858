import fc from "fast-check";
import { PassThrough } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, dbKind, expectError, startServer, type TestServer } from "./harness.js";

describe(`secrets never reach the logs (${dbKind})`, () => {
  let s: TestServer;
  let logs = "";
  const STRIPE_SECRET = "sk_test_stripe_config_secret_4242424242";
  beforeAll(async () => {
    const stream = new PassThrough();
    stream.on("data", (d) => (logs += d.toString()));
    s = await startServer({ LOG_LEVEL: "debug", STRIPE_TEST_SECRET_KEY: STRIPE_SECRET }, { logStream: stream });
  });
  afterAll(() => s.close());

  it("logs requests without API keys, admin token, ephemeral secrets or Stripe keys", async () => {
    const created = await s.request("POST", "/v1/cards", { body: { amount_cents: 500 } });
    const card = await s.request("GET", `/v1/cards/${created.body.id}?nonce=client-nonce-secret`);
    const ephemeral = card.body.ephemeral_key_secret as string;
    expect(ephemeral).toMatch(/^ek_test_/);
    expectError(await s.request("GET", `/v1/cards?api_key=${s.apiKey}`, { key: null }), 401, "unauthorized");
    await s.request("GET", "/v1/balance", { key: "sk_test_wrongwrongwrongwrongwrong" });
    const key = await (await s.newAccount()).key();
    await s.request("GET", "/v1/balance", { key });
    await s.request("POST", "/v1/cards", { rawBody: `{"amount_cents": "${s.apiKey}"`, headers: { "content-type": "application/json" } });
    await new Promise((r) => setTimeout(r, 50));
    expect(logs).toContain('"url":"/v1/balance"'); // requests are logged…
    for (const secret of [s.apiKey, key, ADMIN_TOKEN, ephemeral, STRIPE_SECRET, "client-nonce-secret", "sk_test_wrongwrong"])
      expect(logs, `log contains ${secret.slice(0, 12)}…`).not.toContain(secret); // …but no secret
  });
});

describe(`API answers are never cached, and https is kept to (${dbKind})`, () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startServer();
  });
  afterAll(() => s.close());

  it("answers Cache-Control: no-store on /v1, /trpc, /admin and /auth, errors included; the dashboard's page keeps its own", async () => {
    const created = await s.request("POST", "/v1/cards", { body: { amount_cents: 500 } });
    const answers = [
      created,
      await s.request("GET", `/v1/cards/${created.body.id}`),
      await s.request("GET", "/trpc/balance.retrieve"),
      await s.request("GET", "/v1/balance", { key: null }),
      await s.request("GET", "/auth/session", { key: null }),
      await fetch(`${s.url}/admin/v1/accounts/acct_nope`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } }),
    ];
    for (const [i, a] of answers.entries()) expect(a.headers.get("cache-control"), `answer ${i}`).toBe("no-store");
    expect((await fetch(`${s.url}/`)).headers.get("cache-control")).toBe("no-cache");
    expect(created.headers.get("strict-transport-security")).toBeNull();
  });

  it("answers Strict-Transport-Security when PUBLIC_URL is https", async () => {
    const t = await startServer({ PUBLIC_URL: "https://cards.example.com" });
    try {
      for (const path of ["/v1/balance", "/"]) expect((await fetch(`${t.url}${path}`)).headers.get("strict-transport-security"), path).toBe("max-age=31536000");
    } finally {
      await t.close();
    }
  });
});

describe(`no internals in responses, no 500 from any input (${dbKind})`, () => {
  let s: TestServer;
  let cardId: string;
  let approvalId: string;
  beforeAll(async () => {
    s = await startServer({ RATE_LIMIT_PER_HOUR: "1000000" });
    cardId = (await s.request("POST", "/v1/cards", { body: { amount_cents: 500 } })).body.id;
    approvalId = (await s.request("POST", "/v1/cards", { body: { amount_cents: 500, policy_override: { approval_required: true } } })).body
      .approval_id;
  });
  afterAll(() => s.close());

  it("answers a database failure with 500 internal_error, without stack or SQL", async () => {
    const broken = await startServer();
    try {
      await broken.query("DROP TABLE policies");
      const r = await broken.request("GET", "/v1/policies/default");
      const err = expectError(r, 500, "internal_error");
      const text = JSON.stringify(r.body);
      for (const leak of ["SELECT", "policies", "at ", ".ts:", "SQLITE", "ER_"]) expect(text).not.toContain(leak);
      expect(err.message).toMatch(/request id/);
    } finally {
      await broken.close();
    }
  });

  const endpoints = () => [
    ["POST", "/v1/cards"],
    ["GET", "/v1/cards"],
    ["GET", `/v1/cards/${cardId}`],
    ["POST", `/v1/cards/${cardId}/close`],
    ["GET", "/v1/balance"],
    ["GET", "/v1/policies/default"],
    ["PUT", "/v1/policies/default"],
    ["GET", "/v1/approvals"],
    ["POST", `/v1/approvals/${approvalId}/approve`],
    ["POST", `/v1/approvals/${approvalId}/reject`],
    ["POST", `/v1/test_helpers/cards/${cardId}/purchase`],
    ["POST", "/trpc/cards.create"],
    ["GET", "/trpc/cards.list"],
    ["POST", "/admin/v1/accounts"],
  ];

  const anyBody = fc.oneof(
    fc.json({ maxDepth: 3 }),
    fc.string({ maxLength: 200 }),
    fc.constantFrom("", "{", "null", "[]", '{"amount_cents":1e400}', '{"__proto__":{"x":1}}', "\u0000", '{"amount_cents":-1}'),
    fc.record({
      amount_cents: fc.oneof(fc.integer(), fc.double(), fc.string(), fc.constant(null)),
      agent_id: fc.oneof(fc.string({ maxLength: 300 }), fc.integer()),
      purpose: fc.string({ maxLength: 600 }),
      policy_override: fc.anything({ maxDepth: 2 }),
      approval_required: fc.anything({ maxDepth: 1 }),
      max_amount_cents: fc.anything({ maxDepth: 1 }),
      reason: fc.anything({ maxDepth: 1 }),
    }).map((o) => JSON.stringify(o)),
  );
  const anyQuery = fc.dictionary(
    fc.constantFrom("limit", "status", "agent_id", "starting_after", "nonce", "input", "x"),
    fc.oneof(fc.string({ maxLength: 40 }), fc.integer().map(String), fc.constantFrom("-1", "0", "101", "1e3", "OPEN", "%ZZ", "")),
    { maxKeys: 4 },
  );
  const anyHeaders = fc.record(
    {
      "content-type": fc.constantFrom("application/json", "text/plain", "application/x-www-form-urlencoded", "application/json; charset=utf-8", "", "*/*"),
      "idempotency-key": fc.string({ maxLength: 250 }).filter((k) => /^[\x21-\x7e]*$/.test(k)),
      authorization: fc.constantFrom("Bearer", "Bearer sk_live_x", "Basic abc", "bearer  sk_test_", ""),
    },
    { requiredKeys: [] },
  );

  it("finds no 500 and always the envelope, for random bodies, headers and queries on every endpoint", async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...endpoints()), anyBody, anyQuery, anyHeaders, async ([method, path], body, query, headers) => {
        const qs = new URLSearchParams(query).toString();
        const useValidKey = !("authorization" in headers);
        const r = await s.request(method!, `${path}${qs ? `?${qs}` : ""}`, {
          rawBody: method === "GET" ? undefined : body,
          headers: { ...headers, ...(path!.startsWith("/admin") && useValidKey ? { authorization: `Bearer ${ADMIN_TOKEN}` } : {}) },
          key: useValidKey ? undefined : null,
        });
        expect(r.status, `${method} ${path}?${qs} ${body}`).toBeLessThan(500);
        expect(r.headers.get("request-id")).toMatch(/^req_/);
        if (r.status >= 400) expectError(r, r.status, r.body.error.code);
      }),
      { numRuns: 400 },
    );
  });
});
