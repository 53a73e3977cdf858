import { PassThrough } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, dbKind, expectError, startServer, type TestServer } from "./harness.js";
import { guarded, trpc } from "./helpers.js";

/** Spec 7 and DESIGN 3.4: one error envelope for every failure on both transports, and Request-Id. */
describe(`errors and envelopes (${dbKind})`, () => {
  let s: TestServer;
  beforeAll(async () => {
    s = guarded(await startServer());
  });
  afterAll(() => s.close());

  const json = { "content-type": "application/json" };

  describe("400 invalid_json for malformed JSON", () => {
    for (const rawBody of ['{"amount_cents":', "{amount_cents: 100}", "{'a':1}", '{"a":1}}', "nul"])
      it(`body ${JSON.stringify(rawBody)} on /v1, /trpc and /admin/v1`, async () => {
        const v1 = expectError(await s.request("POST", "/v1/cards", { rawBody, headers: json }), 400, "invalid_json");
        expect(v1.details).toBeUndefined();
        expectError(await s.request("PUT", "/v1/policies/default", { rawBody, headers: json }), 400, "invalid_json");
        expectError(await s.request("POST", "/trpc/cards.create", { rawBody, headers: json }), 400, "invalid_json");
        expectError(
          await s.request("POST", "/admin/v1/accounts", { rawBody, key: null, headers: { ...json, authorization: `Bearer ${ADMIN_TOKEN}` } }),
          400,
          "invalid_json",
        );
      });

    it("malformed JSON creates nothing", async () => {
      const before = (await s.request("GET", "/v1/balance")).body.held_cents;
      await s.request("POST", "/v1/cards", { rawBody: '{"amount_cents": 100', headers: json });
      expect((await s.request("GET", "/v1/balance")).body.held_cents).toBe(before);
    });
  });

  describe("REST bodies must be JSON objects", () => {
    for (const rawBody of ["[]", "null", "5", '"text"', "true", '[{"max_amount_cents":5}]'])
      it(`PUT /v1/policies/default with ${rawBody} → 400, policy unchanged`, async () => {
        const key = await (await s.newAccount()).key();
        const err = expectError(await s.request("PUT", "/v1/policies/default", { key, rawBody, headers: json }), 400, "validation_error");
        expect(err.details.issues).toEqual([{ path: "(body)", message: expect.any(String) }]);
        expect((await s.request("GET", "/v1/policies/default", { key })).body).toEqual({ approval_required: false, max_amount_cents: 50000 });
      });

    it("on POST /v1/cards, close and the operator API too; authentication still comes first", async () => {
      expectError(await s.request("POST", "/v1/cards", { rawBody: "[]", headers: json }), 400, "validation_error");
      expectError(await s.request("POST", "/v1/cards/card_x/close", { rawBody: "[]", headers: json }), 400, "validation_error");
      expectError(
        await s.request("POST", "/admin/v1/accounts", { rawBody: "[]", key: null, headers: { ...json, authorization: `Bearer ${ADMIN_TOKEN}` } }),
        400,
        "validation_error",
      );
      expectError(await s.request("PUT", "/v1/policies/default", { rawBody: "[]", key: null, headers: json }), 401, "unauthorized");
      expectError(await s.request("POST", "/admin/v1/accounts", { rawBody: "[]", key: null, headers: json }), 401, "unauthorized");
    });
  });

  describe("415 for a body that is not JSON", () => {
    for (const type of ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/xml"])
      it(`Content-Type ${type}`, async () => {
        const rawBody = type.startsWith("application/x-www") ? "amount_cents=100" : '{"amount_cents":100}';
        const v1 = expectError(await s.request("POST", "/v1/cards", { rawBody, headers: { "content-type": type } }), 415, "unsupported_media_type");
        expect(v1.message).toMatch(/application\/json/);
        expectError(await s.request("POST", "/trpc/cards.create", { rawBody, headers: { "content-type": type } }), 415, "unsupported_media_type");
        expectError(await s.request("PUT", "/v1/policies/default", { rawBody, headers: { "content-type": type } }), 415, "unsupported_media_type");
      });

    it("a body without any Content-Type is refused with 415 too", async () => {
      const res = await fetch(`${s.url}/v1/cards`, {
        method: "POST",
        headers: { authorization: `Bearer ${s.apiKey}`, "content-type": "" },
        body: new Blob(['{"amount_cents":100}']),
      });
      // fetch sends no Content-Type for a typeless Blob.
      const body = await res.json();
      expectError({ status: res.status, headers: res.headers, body }, 415, "unsupported_media_type");
    });

    it("application/json with a charset parameter is JSON", async () => {
      const r = await s.request("POST", "/v1/cards", { body: { amount_cents: 100 }, headers: { "content-type": "application/json; charset=utf-8" } });
      expect(r.status).toBe(201);
    });
  });

  describe("413 for a body over 100 kB", () => {
    const big = JSON.stringify({ amount_cents: 100, purpose: "x".repeat(101 * 1024) });
    it("on /v1, /trpc and /admin/v1, nothing created", async () => {
      const before = (await s.request("GET", "/v1/cards?limit=100")).body.data.length;
      for (const [path, headers] of [
        ["/v1/cards", json],
        ["/trpc/cards.create", json],
        ["/admin/v1/accounts", { ...json, authorization: `Bearer ${ADMIN_TOKEN}` }],
      ] as const) {
        const err = expectError(await s.request("POST", path, { rawBody: big, headers, key: path.startsWith("/admin") ? null : undefined }), 413, "payload_too_large");
        expect(err.message).toMatch(/100 kB/);
      }
      expect((await s.request("GET", "/v1/cards?limit=100")).body.data.length).toBe(before);
    });

    it("a body just under 100 kB is parsed (and then validated)", async () => {
      const under = JSON.stringify({ amount_cents: 100, purpose: "x".repeat(99 * 1024) });
      const err = expectError(await s.request("POST", "/v1/cards", { rawBody: under, headers: json }), 400, "validation_error");
      expect(err.details.issues.map((i: any) => i.path)).toEqual(["purpose"]);
    });
  });

  describe("404 not_found for unknown routes", () => {
    const routes: [string, string][] = [
      ["GET", "/v1/nope"],
      ["GET", "/v1/cards/card_x/nope"],
      ["POST", "/v1/cards/card_x/open"],
      ["DELETE", "/v1/cards"],
      ["PATCH", "/v1/policies/default"],
      ["GET", "/v2/cards"],
      ["GET", "/nope"],
      ["POST", "/"],
      ["GET", "/trpc/nope.nothing"],
      ["POST", "/trpc/cards.nope"],
      ["GET", "/admin/v1/nope"],
    ];
    for (const [method, path] of routes)
      it(`${method} ${path}`, async () => {
        const headers = path.startsWith("/admin") ? { authorization: `Bearer ${ADMIN_TOKEN}` } : undefined;
        const err = expectError(await s.request(method, path, { headers, key: headers ? null : undefined }), 404, "not_found");
        expect(err.details).toBeUndefined();
      });
  });

  it("HEAD is not an alias of GET on /v1 (reading a card makes an ephemeral key): 404", async () => {
    // (/trpc keeps tRPC's own answer to HEAD, 204 without running a procedure.)
    for (const path of ["/v1/balance", "/v1/cards", "/v1/cards/card_x", "/v1/policies/default"]) {
      const res = await fetch(`${s.url}${path}`, { method: "HEAD", headers: { authorization: `Bearer ${s.apiKey}` } });
      expect(res.status, path).toBe(404);
      expect(res.headers.get("request-id"), path).toMatch(/^req_/);
    }
  });

  describe("failures of the router itself get the envelope and a Request-Id too", () => {
    it("malformed percent-encoding in the path → 400 bad_request, on /v1, /trpc and elsewhere", async () => {
      for (const [method, path] of [
        ["GET", "/v1/cards/%E0%A4%A"],
        ["POST", "/v1/cards/%zz/close"],
        ["POST", "/trpc/cards.create%"],
        ["GET", "/%"],
      ]) {
        const err = expectError(await s.request(method!, path!), 400, "bad_request");
        expect(err.message).toMatch(/URL/);
      }
    });

    it("an over-long path parameter → 414 uri_too_long", async () => {
      expectError(await s.request("GET", `/docs/${"a".repeat(200)}`, { key: null }), 414, "uri_too_long");
    });
  });

  describe("Request-Id", () => {
    it("is on every response, unique, and equals error.request_id on errors", async () => {
      const replies = [
        await s.request("GET", "/v1/balance"),
        await s.request("POST", "/v1/cards", { body: { amount_cents: 100 } }),
        await s.request("POST", "/v1/cards", { body: { amount_cents: 100, policy_override: { approval_required: true } } }),
        await s.request("GET", "/v1/openapi.json"),
        await s.request("GET", "/docs"),
        await s.request("GET", "/health"),
        await s.request("GET", "/nope"),
        await s.request("GET", "/v1/balance", { key: null }),
        await s.request("POST", "/v1/cards", { body: { amount_cents: 0 } }),
        await trpc(s).query("balance.retrieve", undefined),
        await trpc(s).mutation("cards.create", { amount_cents: 0 }),
        await s.admin("GET", "/accounts/acct_nope"),
      ];
      expect(replies.map((r) => r.status)).toEqual([200, 201, 202, 200, 200, 200, 404, 401, 400, 200, 400, 404]);
      const ids = replies.map((r) => r.headers.get("request-id"));
      for (const id of ids) expect(id).toMatch(/^req_[A-Za-z0-9_-]{8,}$/);
      expect(new Set(ids).size).toBe(ids.length);
      for (const r of replies) if (r.status >= 400) expect(r.body.error.request_id).toBe(r.headers.get("request-id"));
    });

    it("rate-limit headers are on success and error responses, Reset a unix timestamp in seconds", async () => {
      for (const r of [await s.request("GET", "/v1/balance"), await s.request("GET", "/v1/cards/card_nope"), await trpc(s).query("balance.retrieve", undefined)]) {
        expect(r.headers.get("ratelimit-limit")).toBe("1000");
        expect(Number(r.headers.get("ratelimit-remaining"))).toBeGreaterThanOrEqual(0);
        const reset = Number(r.headers.get("ratelimit-reset"));
        const now = Date.now() / 1000;
        expect(reset).toBeGreaterThan(now - 1);
        expect(reset).toBeLessThanOrEqual(now + 3600 + 1);
      }
    });
  });

  describe("validation messages say what is expected, in API terms (issue 14.8)", () => {
    const messageOf = async (body: unknown) => expectError(await s.request("POST", "/v1/cards", { body }), 400, "validation_error");
    const cents = "amount_cents must be an integer number of cents from 1 to 50000";
    const cases: [string, unknown, { path: string; message: string }[]][] = [
      ["missing", {}, [{ path: "amount_cents", message: "amount_cents is required: an integer number of cents from 1 to 50000" }]],
      ["too small", { amount_cents: 0 }, [{ path: "amount_cents", message: cents }]],
      ["too big", { amount_cents: 50001 }, [{ path: "amount_cents", message: cents }]],
      ["not an integer", { amount_cents: 10.5 }, [{ path: "amount_cents", message: cents }]],
      ["wrong type", { amount_cents: "100" }, [{ path: "amount_cents", message: cents }]],
      ["huge (two checks of one field, one sentence)", { amount_cents: 1e300 }, [{ path: "amount_cents", message: cents }]],
      ["a string too long", { amount_cents: 100, purpose: "x".repeat(501) }, [{ path: "purpose", message: "purpose must be at most 500 characters long" }]],
      ["an empty string", { amount_cents: 100, agent_id: "" }, [{ path: "agent_id", message: "agent_id must not be empty" }]],
      ["a string of the wrong type", { amount_cents: 100, purpose: 5 }, [{ path: "purpose", message: "purpose must be a string, not a number" }]],
      [
        "a boolean as a string",
        { amount_cents: 100, policy_override: { approval_required: "false" } },
        [{ path: "policy_override.approval_required", message: "policy_override.approval_required must be true or false, not a string" }],
      ],
      [
        "an unknown field (strict)",
        { amount_cents: 100, currency: "usd" },
        [{ path: "currency", message: "currency is not a field of the request (field names are case-sensitive)" }],
      ],
      [
        "an unknown nested field",
        { amount_cents: 100, policy_override: { max: 5 } },
        [{ path: "policy_override.max", message: "policy_override.max is not a field of policy_override (field names are case-sensitive)" }],
      ],
    ];
    for (const [name, body, issues] of cases)
      it(name, async () => {
        const err = await messageOf(body);
        expect(err.details).toEqual({ issues });
        expect(err.message).toBe(`Invalid request: ${issues.map((i) => i.message).join("; ")}.`);
        expect(err.message).not.toMatch(/Too (small|big)|Invalid input|expected number|>=|<=/);
      });

    it("an unknown enum value lists the allowed values (query parameters too)", async () => {
      const err = expectError(await s.request("GET", "/v1/cards?status=open"), 400, "validation_error");
      expect(err.details.issues).toEqual([{ path: "status", message: "status must be one of OPEN, USED, CLOSED, PENDING_APPROVAL" }]);
      const limit = expectError(await s.request("GET", "/v1/cards?limit=0"), 400, "validation_error");
      expect(limit.message).toBe("Invalid request: limit must be at least 1.");
    });

    it("several problems: one sentence per field, in one message", async () => {
      const err = await messageOf({ amount_cents: 0, purpose: "x".repeat(501), nope: 1 });
      expect(err.details.issues.map((i: any) => i.path)).toEqual(["amount_cents", "purpose", "nope"]);
      expect(err.message).toBe(
        `Invalid request: ${cents}; purpose must be at most 500 characters long; nope is not a field of the request (field names are case-sensitive).`,
      );
    });

    it("the same messages on the tRPC transport", async () => {
      const err = expectError(await trpc(s).mutation("cards.create", { amount_cents: 2.5 }), 400, "validation_error");
      expect(err.details).toEqual({ issues: [{ path: "amount_cents", message: cents }] });
      expect(err.message).toBe(`Invalid request: ${cents}.`);
      const list = expectError(await trpc(s).query("cards.list", { status: "NOPE" }), 400, "validation_error");
      expect(list.message).toBe("Invalid request: status must be one of OPEN, USED, CLOSED, PENDING_APPROVAL.");
    });

    it("a body that is not an object, and the operator API's messages", async () => {
      const body = expectError(await s.request("POST", "/v1/cards", { rawBody: "[]", headers: json }), 400, "validation_error");
      expect(body.details.issues).toEqual([{ path: "(body)", message: "the request body must be a JSON object" }]);
      const policy = expectError(await s.request("PUT", "/v1/policies/default", { body: { max_amount_cents: -1 } }), 400, "validation_error");
      expect(policy.message).toBe("Invalid request: max_amount_cents must be an integer number of cents from 1 to 50000.");
      const key = expectError(await s.admin("POST", "/accounts/acct_x/keys", { mode: "prod" }), 400, "validation_error");
      expect(key.details.issues).toEqual([{ path: "mode", message: "mode must be one of test, live" }]);
    });

    it("a field named like a path parameter is refused, not overridden by the path: the card stays as it was", async () => {
      const mine = (await s.request("POST", "/v1/cards", { body: { amount_cents: 300 } })).body;
      const other = (await s.request("POST", "/v1/cards", { body: { amount_cents: 300 } })).body;
      const issues = [{ path: "id", message: "id is given by the path, not a field of the request" }];
      const close = expectError(await s.request("POST", `/v1/cards/${mine.id}/close`, { body: { id: other.id } }), 400, "validation_error");
      expect(close.details.issues).toEqual(issues);
      expect(close.message).toBe(`Invalid request: ${issues[0]!.message}.`);
      expectError(await s.request("POST", `/v1/cards/${mine.id}/close`, { body: { id: mine.id } }), 400, "validation_error");
      expect(expectError(await s.request("GET", `/v1/cards/${mine.id}?id=${other.id}`), 400, "validation_error").details.issues).toEqual(issues);
      for (const card of [mine, other]) expect((await s.request("GET", `/v1/cards/${card.id}`)).body.status).toBe("OPEN");
      expect((await s.request("POST", `/v1/cards/${mine.id}/close`)).body).toEqual({ ok: true, status: "CLOSED" });
    });
    it("a query field given more than once is refused by name, whatever its type", async () => {
      const limit = expectError(await s.request("GET", "/v1/cards?limit=1&limit=2"), 400, "validation_error");
      expect(limit.details.issues).toEqual([{ path: "limit", message: "limit is given more than once; give it once" }]);
      expect(limit.message).toBe("Invalid request: limit is given more than once; give it once.");
      const type = expectError(await s.request("GET", "/v1/events?type=card.created&type=card.closed"), 400, "validation_error");
      expect(type.details.issues).toEqual([{ path: "type", message: "type is given more than once; give it once" }]);
      expect((await s.request("GET", "/v1/cards?limit=1")).status).toBe(200);
    });
  });

  describe("error bodies carry nothing but the envelope", () => {
    it("tRPC errors are not tRPC's own shape (no json/data/shape keys)", async () => {
      const r = await trpc(s).mutation("cards.create", { amount_cents: "x" });
      const err = expectError(r, 400, "validation_error");
      expect(JSON.stringify(r.body)).not.toMatch(/"(json|data|shape|httpStatus|stack|zodError)"/);
      expect(err.details.issues).toEqual([{ path: "amount_cents", message: expect.any(String) }]);
    });

    it("REST validation errors are not trpc-to-openapi's {message, code, issues}", async () => {
      const r = await s.request("PUT", "/v1/policies/default", { body: { max_amount_cents: -1 } });
      expectError(r, 400, "validation_error");
      expect(Object.keys(r.body)).toEqual(["error"]);
      expect(r.body.error.code).not.toBe("BAD_REQUEST");
    });

    it("unknown body fields are a validation error on both transports", async () => {
      const v1 = expectError(await s.request("POST", "/v1/cards", { body: { amount_cents: 100, currency: "usd" } }), 400, "validation_error");
      expect(JSON.stringify(v1.details.issues)).toContain("currency");
      expectError(await trpc(s).mutation("cards.create", { amount_cents: 100, currency: "usd" }), 400, "validation_error");
    });
  });

  it("500 internal_error on the tRPC transport too: envelope, no stack, no SQL; the cause is logged", async () => {
    let logs = "";
    const stream = new PassThrough().on("data", (d) => (logs += d.toString()));
    const broken = await startServer({ LOG_LEVEL: "error" }, { logStream: stream });
    try {
      await broken.query("DROP TABLE policies");
      for (const r of [
        await trpc(broken).query("policies.retrieveDefault", undefined),
        await broken.request("GET", "/v1/balance"),
        await broken.request("POST", "/v1/cards", { body: { amount_cents: 100 } }),
      ]) {
        expectError(r, 500, "internal_error");
        const text = JSON.stringify(r.body);
        for (const leak of ["SELECT", "policies", "at ", ".ts:", "SQLITE", "ER_", "stack"]) expect(text).not.toContain(leak);
        // The operator finds the cause by the request id the client quotes.
        const line = logs.split("\n").find((l) => l.includes(r.body.error.request_id));
        expect(line).toContain("unhandled error");
        expect(line).toContain("policies");
      }
    } finally {
      await broken.close();
    }
  });
});
