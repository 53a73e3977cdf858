import { readFile, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import SwaggerParser from "@apidevtools/swagger-parser";
import createClient, { type Middleware } from "openapi-fetch";
import openapiTS, { astToString, COMMENT_HEADER } from "openapi-typescript";
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from "vitest";
import type { components, paths } from "./generated/openapi.js";
import { ADMIN_TOKEN, dbKind, startServer, TEST_CARDHOLDER, type TestServer } from "./harness.js";

const GENERATED = join(dirname(fileURLToPath(import.meta.url)), "generated", "openapi.ts");
const BANNER =
  "// Types of GET /v1/openapi.json, made by openapi-typescript in test/openapi-client.test.ts, which fails when\n" +
  "// this file is out of date. Regenerate: cd apps/server && UPDATE_OPENAPI_TYPES=1 npx vitest run test/openapi-client.test.ts\n";

type Schemas = components["schemas"];

/**
 * A client generated from the served OpenAPI document (openapi-typescript types, openapi-fetch
 * calls) runs the README's walkthrough against the real server, typed end to end: this file
 * typechecks with the generated types (`npx tsc -p apps/server/tsconfig.json`), and the types of
 * the bodies are asserted, so a document that lost its schemas (bodies typed unknown) fails here.
 */
describe(`a client generated from /v1/openapi.json (${dbKind})`, () => {
  let s: TestServer;
  /** The served document, every $ref resolved. */
  let doc: any;
  /** Every answer that the document does not describe: a status it does not list, or other fields. */
  const undocumented: string[] = [];
  let checked = 0;
  /** Checks each answer against the document: the status is listed, the body has the schema's fields. */
  const conformance: Middleware = {
    async onResponse({ request, response, schemaPath }) {
      checked++;
      const what = `${request.method} ${schemaPath} → ${response.status}`;
      const documented = doc.paths[schemaPath]?.[request.method.toLowerCase()]?.responses?.[String(response.status)];
      if (!documented) return void undocumented.push(`${what}: status not documented`);
      for (const header of Object.keys(documented.headers ?? {}).filter((h) => documented.headers[h].required))
        if (!response.headers.has(header)) undocumented.push(`${what}: no ${header} header`);
      const schema = documented.content?.["application/json"]?.schema;
      const body = await response.clone().json();
      const keys = Object.keys(body).sort();
      const required = [...(schema?.required ?? [])].sort();
      const allowed = Object.keys(schema?.properties ?? {});
      if (required.some((k) => !keys.includes(k)) || keys.some((k) => !allowed.includes(k)))
        undocumented.push(`${what}: fields ${keys} against schema ${allowed} (required ${required})`);
    },
  };
  beforeAll(async () => {
    s = await startServer();
    doc = await SwaggerParser.dereference(await (await fetch(`${s.url}/v1/openapi.json`)).json());
  });
  afterAll(() => s.close());

  it("test/generated/openapi.ts is what openapi-typescript makes of the served document today", async () => {
    const doc = await (await fetch(`${s.url}/v1/openapi.json`)).json();
    const generated = COMMENT_HEADER + BANNER + "\n" + astToString(await openapiTS(doc, { silent: true }));
    if (process.env.UPDATE_OPENAPI_TYPES) await writeFile(GENERATED, generated);
    const checkedIn = await readFile(GENERATED, "utf8").catch(() => "(missing)");
    expect(checkedIn, "test/generated/openapi.ts is stale; see its header to regenerate it").toBe(generated);
  });

  it("runs the README walkthrough, fully typed", async () => {
    const api = createClient<paths>({ baseUrl: s.url, headers: { Authorization: `Bearer ${s.apiKey}` } });
    api.use(conformance);

    // Make the default policy require approval, then ask for a card: 202 with an approval request.
    const policy = await api.PUT("/v1/policies/default", { body: { approval_required: true } });
    expect(policy.response.status).toBe(200);
    expectTypeOf(policy.data).toEqualTypeOf<Schemas["Policy"] | undefined>();
    expect(policy.data).toEqual({ approval_required: true, max_amount_cents: 50000 });

    const requested = await api.POST("/v1/cards", {
      params: { header: { "Idempotency-Key": "order-1042" } },
      body: { amount_cents: 2500, agent_id: "shopping-agent", purpose: "Domain renewal" },
    });
    expectTypeOf(requested.data).toEqualTypeOf<Schemas["CardCreated"] | Schemas["PendingApproval"] | undefined>();
    expect(requested.response.status).toBe(202);
    expect(requested.response.headers.get("request-id")).toMatch(/^req_/);
    expect(requested.response.headers.get("ratelimit-limit")).toBeTruthy();
    const pending = requested.data!;
    if (pending.status !== "PENDING_APPROVAL") throw new Error(`expected a pending approval, got ${JSON.stringify(pending)}`);
    expectTypeOf(pending).toEqualTypeOf<Schemas["PendingApproval"]>();
    expectTypeOf(pending.approval_id).toEqualTypeOf<string>();
    expect(pending.approval_id).toMatch(/^appr_/);

    // The same Idempotency-Key answers the same approval again.
    const replay = await api.POST("/v1/cards", {
      params: { header: { "Idempotency-Key": "order-1042" } },
      body: { amount_cents: 2500, agent_id: "shopping-agent", purpose: "Domain renewal" },
    });
    expect(replay.response.status).toBe(202);
    expect(replay.response.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.data).toEqual(pending);

    // A human lists pending requests and approves one: 201 with the card.
    const approvals = await api.GET("/v1/approvals", { params: { query: { status: "PENDING" } } });
    expectTypeOf(approvals.data!.data).toEqualTypeOf<Schemas["Approval"][]>();
    expect(approvals.data!.data.map((a) => [a.id, a.amount_cents, a.agent_id, a.status])).toEqual([[pending.approval_id, 2500, "shopping-agent", "PENDING"]]);
    expect(approvals.data!.has_more).toBe(false);

    const approved = await api.POST("/v1/approvals/{id}/approve", { params: { path: { id: pending.approval_id } } });
    expect(approved.response.status).toBe(201);
    expectTypeOf(approved.data).toEqualTypeOf<Schemas["CardCreated"] | undefined>();
    const card = approved.data!;
    expectTypeOf(card.spending_limit_cents).toEqualTypeOf<number>();
    expectTypeOf(card.status).toEqualTypeOf<"OPEN" | "USED" | "CLOSED">();
    expect(card).toMatchObject({ status: "OPEN", spending_limit_cents: 2500, remaining_cents: 2500, agent_id: "shopping-agent" });
    expect(card.id).toMatch(/^card_/);
    expect(card.expiration).toMatch(/^\d{2}\/\d{2}$/);

    // Read the card: an ephemeral key secret, never the number.
    const read = await api.GET("/v1/cards/{id}", { params: { path: { id: card.id } } });
    expectTypeOf(read.data).toEqualTypeOf<Schemas["CardDetail"] | undefined>();
    expectTypeOf(read.data!.ephemeral_key_secret).toEqualTypeOf<string>();
    expect(read.data).toMatchObject({ id: card.id, status: "OPEN", amount_cents: 2500, purpose: "Domain renewal", closed_at: null });
    expect(read.data!.ephemeral_key_secret).toBeTruthy();
    expect(JSON.stringify(read.data)).not.toMatch(/"(number|pan|cvc|cvv)"/i);

    // In test mode, simulate the purchase: the single-use card becomes USED.
    const purchase = await api.POST("/v1/test_helpers/cards/{id}/purchase", {
      params: { path: { id: card.id } },
      body: { amount_cents: 1999, merchant: "Registrar Inc." },
    });
    expect(purchase.response.status).toBe(200);
    expectTypeOf(purchase.data!.approved).toEqualTypeOf<boolean>();
    expect(purchase.data).toMatchObject({ approved: true, decline_reason: null, amount_cents: 1999 });
    expect(purchase.data!.card).toMatchObject({ id: card.id, status: "USED", remaining_cents: 0 });

    const balance = await api.GET("/v1/balance");
    expectTypeOf(balance.data).toEqualTypeOf<Schemas["Balance"] | undefined>();
    expect(balance.data).toMatchObject({ held_cents: 0, open_cards: 0, pending_approvals: 0, max_per_card_cents: 50000, approval_required: true, setup_complete: true });

    const transactions = await api.GET("/v1/transactions", { params: { query: { card_id: card.id } } });
    expectTypeOf(transactions.data!.data).toEqualTypeOf<Schemas["Transaction"][]>();
    expect(transactions.data!.data.map((t) => [t.type, t.amount_cents])).toEqual([["capture", 1999]]);

    // Without approval required, a create is answered 201 with the card at once; then close it.
    await api.PUT("/v1/policies/default", { body: { approval_required: false } });
    const direct = await api.POST("/v1/cards", { body: { amount_cents: 500, agent_id: "shopping-agent" } });
    expect(direct.response.status).toBe(201);
    const second = direct.data!;
    if (second.status === "PENDING_APPROVAL") throw new Error("expected a card");
    expectTypeOf(second).toEqualTypeOf<Schemas["CardCreated"]>();
    expect(second).toMatchObject({ status: "OPEN", spending_limit_cents: 500, remaining_cents: 500 });

    const closed = await api.POST("/v1/cards/{id}/close", { params: { path: { id: second.id } } });
    expectTypeOf(closed.data).toEqualTypeOf<{ ok: true; status: "CLOSED" } | undefined>();
    expect(closed.data).toEqual({ ok: true, status: "CLOSED" });
    expect((await api.POST("/v1/cards/{id}/close", { params: { path: { id: second.id } } })).data).toEqual({ ok: true, status: "CLOSED" });

    const open = await api.GET("/v1/cards", { params: { query: { status: "OPEN" } } });
    expect(open.data!.data).toEqual([]);
    const all = await api.GET("/v1/cards", { params: { query: { limit: 10 } } });
    expect(all.data!.data.map((c) => [c.id, c.status])).toEqual([
      [second.id, "CLOSED"],
      [card.id, "USED"],
    ]);
  });

  it("gets errors typed as the Error envelope", async () => {
    const api = createClient<paths>({ baseUrl: s.url, headers: { Authorization: `Bearer ${s.apiKey}` } });
    api.use(conformance);
    await api.PUT("/v1/policies/default", { body: { approval_required: false, max_amount_cents: 1000 } });
    const tooMuch = await api.POST("/v1/cards", { body: { amount_cents: 2500 } });
    expect(tooMuch.data).toBeUndefined();
    expect(tooMuch.response.status).toBe(403);
    expectTypeOf(tooMuch.error).toEqualTypeOf<Schemas["Error"] | undefined>();
    expectTypeOf(tooMuch.error!.error.code).toEqualTypeOf<string>();
    expect(tooMuch.error!.error).toMatchObject({ code: "policy_violation", details: { max_amount_cents: 1000, requested: 2500 } });
    expect(tooMuch.error!.error.request_id).toBe(tooMuch.response.headers.get("request-id"));
    await api.PUT("/v1/policies/default", { body: { max_amount_cents: 50000 } });

    const unknown = await api.GET("/v1/cards/{id}", { params: { path: { id: "card_doesnotexist" } } });
    expect(unknown.response.status).toBe(404);
    expect(unknown.error!.error.code).toBe("not_found");

    const noKey = createClient<paths>({ baseUrl: s.url });
    noKey.use(conformance);
    const denied = await noKey.GET("/v1/balance");
    expect(denied.response.status).toBe(401);
    expect(denied.error!.error.code).toBe("unauthorized");
  });

  it("runs the operator part of the walkthrough with the admin token", async () => {
    const admin = createClient<paths>({ baseUrl: s.url, headers: { Authorization: `Bearer ${ADMIN_TOKEN}` } });
    admin.use(conformance);
    const created = await admin.POST("/admin/v1/accounts", { body: { name: "Acme" } });
    expect(created.response.status).toBe(201);
    expectTypeOf(created.data).toEqualTypeOf<Schemas["Account"] | undefined>();
    const id = created.data!.id;
    expect(created.data).toMatchObject({ name: "Acme", kyb_verified: false, payment_method: null });

    await admin.POST("/admin/v1/accounts/{id}/kyb", { params: { path: { id } }, body: { verified: true } });
    const pm = await admin.POST("/admin/v1/accounts/{id}/payment_method", { params: { path: { id } }, body: { payment_method: "pm_card_visa" } });
    expect(pm.data).toMatchObject({ id, kyb_verified: true, payment_method: "pm_card_visa" });
    // Stripe issues cards to a cardholder: part of the set-up there.
    if (s.onStripe) expect((await admin.POST("/admin/v1/accounts/{id}/cardholder", { params: { path: { id } }, body: TEST_CARDHOLDER })).response.status).toBe(200);

    const key = await admin.POST("/admin/v1/accounts/{id}/keys", { params: { path: { id } }, body: { mode: "test", role: "agent" } });
    expect(key.response.status).toBe(201);
    expectTypeOf(key.data!.secret).toEqualTypeOf<string>();
    expect(key.data!.secret).toMatch(/^sk_test_/);

    // The agent key works on /v1, may not approve, and stops at once when revoked.
    const agent = createClient<paths>({ baseUrl: s.url, headers: { Authorization: `Bearer ${key.data!.secret}` } });
    agent.use(conformance);
    expect((await agent.GET("/v1/balance")).data).toMatchObject({ setup_complete: true });
    const forbidden = await agent.PUT("/v1/policies/default", { body: { approval_required: true } });
    expect(forbidden.response.status).toBe(403);
    expect(forbidden.error!.error.code).toBe("forbidden");

    const revoked = await admin.POST("/admin/v1/keys/{id}/revoke", { params: { path: { id: key.data!.id } } });
    expect(revoked.data).toMatchObject({ ok: true });
    expect((await agent.GET("/v1/balance")).response.status).toBe(401);

    const keys = await admin.GET("/admin/v1/accounts/{id}/keys", { params: { path: { id } } });
    expect(keys.data!.data.map((k) => [k.id, k.role, k.revoked_at !== null])).toEqual([[key.data!.id, "agent", true]]);
  });

  // Runs last (the tests of a file run in order): what the walkthroughs above were answered.
  it("got only answers the document describes: listed statuses, required headers, the schemas' fields", () => {
    expect(checked).toBeGreaterThanOrEqual(25);
    expect(undocumented).toEqual([]);
  });
});
